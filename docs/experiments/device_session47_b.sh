# Session 47, call B: the host time of an inference forward piece by piece (s47/launch_parts.py)
# for KernelBench 12's bf16 file and 51's (the rewrite), with the CUDA API's own times under
# Nsight Systems where the image has it; then the GPU tests call A's limit cut: the last of
# tests/test_half_gpu.py, KernelBench's 36 files under autocast, tests/test_wgmma_round16_gpu.py
# whole (the rounded yardstick's final form).
source scripts/device_setup.sh
t "generate + build"
mkdir -p /tmp/b
for n in 12 51; do kgen generate .kb/level2/${n}_*.py --dtype bf16 -o /tmp/b/kb${n}_bf16.py > /dev/null; done
build_files /tmp/b b_builds.log
t "parts"
for n in 12 51; do
  timeout 60 python3 docs/experiments/s47/launch_parts.py $(ls .kb/level2/${n}_*.py) /tmp/b/kb${n}_bf16.py bf16 > $OUT/b_parts_kb${n}.log 2>&1
  cat $OUT/b_parts_kb${n}.log | tail -17
done
if which nsys > /dev/null 2>&1; then
  t "nsys"
  timeout 90 nsys profile -t cuda -o /tmp/b/nsys12 --force-overwrite true python3 docs/experiments/s47/forward_host.py $(ls .kb/level2/12_*.py) bf16 /tmp/b/kb12_bf16.py > /dev/null 2>&1
  timeout 60 nsys stats -r cuda_api_sum /tmp/b/nsys12.nsys-rep > $OUT/b_nsys12_api.txt 2>&1
  head -30 $OUT/b_nsys12_api.txt
else
  echo "no nsys"; ls /usr/local/cuda/bin | grep -i nsys
fi
t "tests"
gpu_tests b_gpu_half_rest.log 60 tests/test_half_gpu.py -k "output_written and (sigmoid_gemm or groupnorm or 300)"
left=$(( 250 - ($(date +%s) - start) ))
gpu_tests b_gpu_kb_autocast.log $left tests/test_kernelbench_autocast_gpu.py
left=$(( 565 - ($(date +%s) - start) ))
gpu_tests b_gpu_round16.log $left tests/test_wgmma_round16_gpu.py
t "end"
