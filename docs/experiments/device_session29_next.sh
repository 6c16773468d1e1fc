# What session 28 leaves for the next session's device time (issue 24's 16-bit tier, ~5 min on an
# H100): Nsight Compute on the two kernels that make a bf16 post-norm block 1.4-1.5x eager bf16
# (docs/perf.md, session 28): kgen's 16-bit GEMM with an epilogue that reads x and Dropout's mask
# per element and stores S in fp32 (0.256-0.284 ms where cuBLAS takes 0.171), and the LayerNorm row
# kernel (0.082 ms where eager's LayerNorm takes 0.033). Read: achieved DRAM bandwidth, occupancy,
# the epilogue's load efficiency (sectors per request of the per-element operand reads).
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
mkdir -p /tmp/n
sed -n '/^cat > \/tmp\/b\/postln.py/,/^PY$/p' docs/experiments/device_session28_b.sh | sed '1d;$d' > /tmp/n/postln.py
(cd /tmp/n && kgen generate postln.py -o postln_new.py --force && python3 -c "
from kgen.check.loading import EmittedFile; import torch
EmittedFile('postln_new.py').build(torch.bfloat16)") > $OUT/n_build.log 2>&1
t "ncu: the 16-bit GEMM and the row kernel"
timeout 400 ncu --kernel-name regex:'wgmma_half_kernel|row_kernel' --launch-skip 6 --launch-count 2 \
  --section SpeedOfLight --section Occupancy --section MemoryWorkloadAnalysis --section LaunchStats \
  python3 scripts/profile_forward.py /tmp/n/postln_new.py --dtype bf16 --iters 3 > $OUT/n_ncu_postln_bf16.txt 2>&1
grep -E "Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Theoretical Occupancy" $OUT/n_ncu_postln_bf16.txt | head -30
t done
