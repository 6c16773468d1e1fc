# Session 56, call D: where the time goes in kgen's files at call C's small odd shapes, where they
# were slower than eager (fp32 68/33/59/14 at 300 x 1337 -> 260; bf16 12/56 at 7 x 300 -> 1031,
# 63/86 at 3 x 4100 -> 333): kernels per forward (scripts/profile_forward.py --eager), time per
# synchronized call and one call's host time (s55/default_device_ab.py plain).
# The files: scripts/kernelbench_shapes.py's references, `kgen generate --dtype` (ab/kb_odd_out).
. scripts/device_setup.sh
mkdir -p /tmp/d
for n in 68 33 59 14; do cp ab/kb_odd_out/fp32/${n}_*.py /tmp/d/fp32_$(basename ab/kb_odd_out/fp32/${n}_*.py); done
for n in 12 56 63 86; do cp ab/kb_odd_out/bf16/${n}_*.py /tmp/d/bf16_$(basename ab/kb_odd_out/bf16/${n}_*.py); done
t build; build_files /tmp/d build.log
for f in /tmp/d/*.py; do
  d=$(basename $f | cut -d_ -f1)
  t "$f"
  timeout 60 python3 scripts/profile_forward.py $f --dtype $d --eager --iters 50 2>&1 | tail -30
  timeout 60 python3 docs/experiments/s55/default_device_ab.py $f plain $d 2>&1 | grep -v "^ " | head -12
done > $OUT/profile.log 2>&1
t done
grep -E "^(---|plain|==|  +[0-9.]+ ms  )" $OUT/profile.log | cut -c1-150 | head -c 11000
