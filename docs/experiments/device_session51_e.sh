# Session 51, call E: ModelNew.kgen_trust_weight_versions (the kept split current while w's version
# counter is unchanged: w's pass not launched). Its GPU tests (test_w_split_gpu.py, the trust test
# among them), then 12's and 39's files as generated against copies with the switch on
# (ab/kb<N>_trusted_fp32.py: `sed 's/^_KGEN_TRUST_WEIGHT_VERSIONS = False$/... = True/'`, the same
# CUDA source, so the same build): a forward's kernels (s49/kernel_times.py) and KernelBench's timing
# replayed (s47/kb_timing_ab.py).
source scripts/device_setup.sh
t "build (in the background) and tests"
mkdir -p /tmp/e && cp ab/kb12_fp32.py ab/kb39_fp32.py /tmp/e/
build_files /tmp/e e_builds.log &
gpu_tests e_gpu_w_split.log 200 tests/test_w_split_gpu.py
wait
t "kernels"
for n in 12 39; do
  timeout 40 python3 docs/experiments/s49/kernel_times.py $(ls .kb/level2/${n}_*.py) fp32 ab/kb${n}_fp32.py ab/kb${n}_trusted_fp32.py > $OUT/e_kernels_kb$n.md 2>&1; grep -E "split|all kernels" $OUT/e_kernels_kb$n.md
done
t "KernelBench's timing"
timeout 60 python3 docs/experiments/s47/kb_timing_ab.py .kb/level2/12_*.py fp32 ab/kb12_fp32.py ab/kb12_trusted_fp32.py > $OUT/e_timing_kb12.md 2>&1; tail -4 $OUT/e_timing_kb12.md
t end
