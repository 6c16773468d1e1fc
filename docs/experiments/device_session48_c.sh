# Session 48, call C: call B's A/B again with more rounds (the host's speed drifted within call B:
# eager's own times moved by 10-40 %), 12 and 33 in bf16, the files before and after the host
# path's trim (ab/old at a68e193, ab/new at e9ba394); then the GPU tests of the trimmed path
# through the C++ autograd node (a bf16 / fp16 module's training: KernelBench's timing runs this
# path, its parameters wanting gradients) and test_custom_ops' autocast tests with the test's own
# tile (call B: the gemm_scale_bn one read another module's builds).
source scripts/device_setup.sh
t "build"
build_files ab/old c_builds_old.log &
build_files ab/new c_builds_new.log
wait
t "A/B"
for n in 12 33; do
  KGEN_AB_ROUNDS=11 timeout 75 python3 docs/experiments/s47/kb_timing_ab.py $(ls .kb/level2/${n}_*.py) bf16 ab/old/kb${n}.py ab/new/kb${n}.py > $OUT/c_ab_kb${n}.md 2>&1
  tail -4 $OUT/c_ab_kb${n}.md
done
t "tests"
gpu_tests c_gpu_custom_ops_autocast.log 130 tests/test_custom_ops.py -k autocast_compiles
left=$(( 560 - ($(date +%s) - start) ))
gpu_tests c_gpu_half_cpp_node.log $left tests/test_half_gpu.py -k cpp_node
t "end"
