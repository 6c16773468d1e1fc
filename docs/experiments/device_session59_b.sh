# Session 59, call B (nvidia-h200-x2).
# GPU 0: the C++ node freed by torch's deleteNode on torch 2.11 (a chain of 200k nodes:
# test_a_long_chain_of_cpp_nodes_is_freed), then the same test with the node's source before the
# change (it should crash: the test's reason to exist), the node's tier (test_half_gpu.py -k
# cpp_node), and kgen validate of a floor division of a buffer (its backward raised before 59).
# GPU 1: KernelBench's 36 files at other shapes (scripts/kernelbench_shapes.py) in bf16, last run
# in session 56.
. scripts/device_setup.sh
python3 scripts/kernelbench_shapes.py .kb/level2 /tmp/kb_odd > $OUT/shapes.txt
(REFS=/tmp/kb_odd PRECISIONS=bf16 CUDA_VISIBLE_DEVICES=1 GPUS=1 EVAL_LIMIT=330 bash scripts/device_kernelbench.sh 2>&1 \
  | grep -v "^---.*done" | grep -v correct | tail -8) > $OUT/odd_bf16.txt 2>&1 &
export CUDA_VISIBLE_DEVICES=0
gpu_tests chain.log 150 tests/test_half_gpu.py -k "long_chain"
cp kgen/codegen/kernels/native_backward.cpp /tmp/nb.cpp
cp .kgen_work/v59b/native_backward_old.cpp kgen/codegen/kernels/native_backward.cpp   # (at 1e9f894)
t "the same test, the node before the change (expected to fail)"
gpu_tests chain_old.log 150 tests/test_half_gpu.py -k "long_chain"
grep -E "returncode|Segmentation|signal|assert" $OUT/chain_old.log | head -5
cp /tmp/nb.cpp kgen/codegen/kernels/native_backward.cpp
gpu_tests node.log 200 tests/test_half_gpu.py -k "cpp_node"
for d in fp32 bf16; do echo "== floordiv $d"; timeout 120 kgen validate .kgen_work/v59b/floordiv.py --dtype $d 2>&1 | tail -4; done > $OUT/validate.log 2>&1
cat $OUT/validate.log
wait
cat $OUT/odd_bf16.txt
t done
