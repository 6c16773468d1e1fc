# Session 56, call F: call D's kernel profile of the fp32 files at 300 x 1337 -> 260 again, with K
# padded (the TMA GEMM), and one synchronized call's time.
. scripts/device_setup.sh
python3 scripts/kernelbench_shapes.py .kb/level2 /tmp/kb_odd > /dev/null
mkdir -p /tmp/f
for n in 68 59; do kgen generate /tmp/kb_odd/${n}_*.py -o /tmp/f/fp32_$n.py --force > /dev/null; done
build_files /tmp/f build.log
for n in 68 59; do
  timeout 40 python3 scripts/profile_forward.py /tmp/f/fp32_$n.py --eager --iters 50 2>&1 | grep -E "^==|ms  "
  timeout 40 python3 docs/experiments/s55/default_device_ab.py /tmp/f/fp32_$n.py plain fp32 2>&1 | grep "^plain.*grad"
done 2>&1 | cut -c1-140 | tee $OUT/profile.log
t done
