# Session 58, call C: where the time goes in fp32 files at the small odd shapes where call B's
# kgen bench put them behind eager (12 / 56 / 41 at 7 x 300 -> 1031: 1.64x / 1.55x / 1.17x;
# 39 at 3 x 4100 -> 333: 1.49x; 68 at 300 x 1337 -> 260: 1.44x): kernels per forward
# (scripts/profile_forward.py --eager) and a synchronized call's time and host time
# (s55/default_device_ab.py plain).
. scripts/device_setup.sh
python3 scripts/kernelbench_shapes.py .kb/level2 /tmp/kb_odd > /dev/null
mkdir -p /tmp/d
for n in 12 56 41 39 68; do
  ref=$(ls /tmp/kb_odd/${n}_*.py)
  kgen generate $ref --dtype fp32 -o /tmp/d/fp32_$(basename $ref) --force > /dev/null
done
t build; build_files /tmp/d build.log
for f in /tmp/d/*.py; do
  t "$f"
  timeout 60 python3 scripts/profile_forward.py $f --eager --iters 50 2>&1 | tail -30
  timeout 60 python3 docs/experiments/s55/default_device_ab.py $f plain fp32 2>&1 | grep -v "^ " | head -12
done > $OUT/profile.log 2>&1
t done
grep -E "^(---|plain|==|  +[0-9.]+ ms  )" $OUT/profile.log | cut -c1-150 | head -c 11000
