# Session 57, call B: K padded in the C entry (kernels/entry.cuh, gemm_k / pad_k) instead of by
# torch.constant_pad_nd in ModelNew (call A: host 132-150 us a forward at 300 x 1337 -> 260,
# session 56's new_zeros form 79-86, eager 74-86).
# 1. A/B in one run: old (e4117fb, constant_pad_nd) and new files of KernelBench 68 and 59 at
#    300 x 1337 -> 260 (scripts/kernelbench_shapes.py), fp32 and bf16: time a call, host time, kernels
#    (files made on the CPU into .kgen_work/ab57, carried);
# 2. the ragged-K GPU tests (K = 257, 1001, 3 on every wgmma math, training, the kept z, 16-bit);
# 3. kgen validate of flinear_bias_ref in bf16 (call A: 17 of 18, the failing check cut off);
# 4. KernelBench's eval on 59 and 68 at that shape, fp32 and bf16.
. scripts/device_setup.sh
t build; build_files .kgen_work/ab57 build.log
t ab
for f in .kgen_work/ab57/*.py; do
  d=$(case $f in *fp32*) echo fp32;; *) echo bf16;; esac)
  echo "== $(basename $f) $d"
  timeout 60 python3 docs/experiments/s55/default_device_ab.py $f plain $d 2>&1 | grep "^plain.*grad"
  timeout 60 python3 scripts/profile_forward.py $f $([ $d = fp32 ] || echo --dtype bf16) --iters 50 2>&1 | grep -E "^==|ms  " | head -6
done 2>&1 | cut -c1-150 | tee $OUT/ab.log
t validate
mkdir -p /tmp/v; kgen generate docs/experiments/s57/flinear_bias_ref.py -o /tmp/v/flinear_bias_ref.py --force > /dev/null
timeout 120 kgen validate /tmp/v/flinear_bias_ref.py --dtype bf16 2>&1 | tee $OUT/validate.log | grep -v "^PASS"
t tests; gpu_tests tests.log 240 tests/test_gpu.py tests/test_keep_z_gpu.py tests/test_half_gpu.py -k ragged
python3 scripts/kernelbench_shapes.py .kb/level2 /tmp/kb_odd > /dev/null
NUMS="59 68" REFS=/tmp/kb_odd PRECISIONS="fp32 bf16" EVAL_LIMIT=150 bash scripts/device_kernelbench.sh 2>&1 | grep -vE "^(NVIDIA|---)" | tail -12
t done
