# Session 29, call A (issue 24's 16-bit tier): where a bf16 forward's time goes at this session's
# first code, kernel by kernel against eager bf16 (KernelBench 84, 30, 39, 12, 33, 99 and the
# post-norm block), then Nsight Compute on 84's and the post-norm block's GEMM and row kernels:
# achieved DRAM bandwidth, occupancy, the epilogue's load efficiency.
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
mkdir -p /tmp/a
sed -n '/^cat > \/tmp\/b\/postln.py/,/^PY$/p' docs/experiments/device_session28_b.sh | sed '1d;$d' > /tmp/a/postln.py
(cd /tmp/a && kgen generate postln.py --dtype bf16 -o postln_new.py --force) > $OUT/a_generate.log 2>&1
for n in 84 30 39 12 33 99; do kgen generate .kb/level2/${n}_*.py --dtype bf16 -o /tmp/a/kb${n}.py --force >> $OUT/a_generate.log 2>&1; done
grep -iE "error|refus" $OUT/a_generate.log | head
(for f in /tmp/a/kb*.py /tmp/a/postln_new.py; do python3 -c "
import sys; from kgen.check.loading import EmittedFile; import torch
EmittedFile(sys.argv[1]).build(torch.bfloat16)" $f & done; wait) > $OUT/a_build.log 2>&1
t "built"
for f in /tmp/a/kb84.py /tmp/a/kb30.py /tmp/a/kb39.py /tmp/a/kb12.py /tmp/a/kb33.py /tmp/a/kb99.py /tmp/a/postln_new.py; do
  timeout 60 python3 scripts/profile_forward.py $f --dtype bf16 --eager
done > $OUT/a_profile_bf16.log 2>&1
grep -E "==|ms  " $OUT/a_profile_bf16.log | cut -c1-130
t "ncu: 84 and the post-norm block, GEMM and row kernel"
for f in /tmp/a/kb84.py /tmp/a/postln_new.py; do
  b=$(basename $f .py)
  timeout 150 ncu --kernel-name regex:'wgmma|row_kernel|Wgmma' --launch-skip 6 --launch-count 2 \
    --section SpeedOfLight --section Occupancy --section MemoryWorkloadAnalysis --section LaunchStats --section WarpStateStats \
    python3 scripts/profile_forward.py $f --dtype bf16 --iters 3 > $OUT/a_ncu_$b.txt 2>&1
  grep -E "^  [a-zA-Z_]|Duration|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per|Theoretical Occupancy|Block Size|Grid Size|Dynamic Shared" $OUT/a_ncu_$b.txt | cut -c1-120 | head -40
done
t done
