# Session 30, call B (issue 24): the 16-bit GEMM's CTAs in clusters of two along M, w's tile
# multicast (call A: eager's cuBLAS GEMM at 1024 x 8192 -> 8192 is nvjet 256x128 in clusters of 2,
# tensor pipe 91 %; kgen's 78 %). GPU tests of the pairs (new) and of the paths whose launch changed
# (split-K's CTAs alone); A/B in bf16 against b7844e6's files (docs/experiments/s30/ab, untracked),
# interleaved in one process; Nsight Compute of the new kernel at KernelBench 12's shape.
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
A=docs/experiments/s30/ab
(for f in $A/*.py; do python3 -c "
import sys; from kgen.check.loading import EmittedFile; import torch
f = EmittedFile(sys.argv[1]); f.build(torch.bfloat16)" $f & done; wait) > $OUT/b_build.log 2>&1 &
t "gpu tests"
timeout 300 python3 -m pytest -m gpu -q -rfEx tests/test_cluster_gpu.py tests/test_split_k_gpu.py -k "cluster or 16_bit or paired" \
  > $OUT/b_gpu_tests.log 2>&1
echo "exit $?"; tail -15 $OUT/b_gpu_tests.log | cut -c1-400
wait
grep -iE "error" $OUT/b_build.log | head -5
t "A/B"
for n in 12 84 39 33 30 99; do
  timeout 60 python3 scripts/compare_forward.py .kb/level2/${n}_*.py $A/kb${n}_before.py $A/kb${n}_after.py --dtype bf16 2>&1 | tail -3
done | tee $OUT/b_ab.log | cut -c1-150
t "ncu"
timeout 120 ncu --kernel-name regex:'wgmma_half' --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section LaunchStats --section Occupancy \
    python3 scripts/profile_forward.py $A/kb12_after.py --dtype bf16 --iters 2 > $OUT/b_ncu_kb12.txt 2>&1
grep -E "Duration|Elapsed Cycles|Compute \(SM\)|L2 Cache Throughput|Cluster Size|Grid Size" $OUT/b_ncu_kb12.txt
t done
