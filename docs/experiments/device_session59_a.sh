# Session 59, call A (nvidia-h200-x2): session 58's commits after its last device call, on the
# GPU, then KernelBench's eval at bf16 on all 36 alone on both GPUs (its timing runs a forward
# that records autograd, whose host time session 58's Node cut; session 58's 1.007 median was
# taken beside GPU tests).
# GPU 0: the op table's GPU accuracy test (logaddexp, logit, frac), test_autocast_dtype_gpu.py in
# full (float32 facts: (y > 0) * 0.1, torch.where of Python numbers; .item() under autocast; a
# number made in a 16-bit dtype).
# GPU 1: the node's tiers (forward-AD check moved: test_half_gpu.py -k cpp_node;
# test_backward_gpu.py), then kgen validate in fp32 and bf16 of docs/experiments/s59/ops_ref.py
# and session 58's two probe modules (.kgen_work/v59: `kgen generate REF` at this commit).
. scripts/device_setup.sh
v=.kgen_work/v59
(
  CUDA_VISIBLE_DEVICES=1 gpu_tests node.log 200 tests/test_half_gpu.py tests/test_backward_gpu.py -k "cpp_node or test_backward_gpu"
  for f in $v/*.py; do for d in fp32 bf16; do
    CUDA_VISIBLE_DEVICES=1 python3 -c "import sys, torch; from kgen.check.loading import EmittedFile; EmittedFile(sys.argv[1]).build(getattr(torch, sys.argv[2]))" $f $([ $d = fp32 ] && echo float32 || echo bfloat16) &
  done; done; wait
  for f in $v/*.py; do for d in fp32 bf16; do
    echo "== $(basename $f) $d"; CUDA_VISIBLE_DEVICES=1 timeout 100 kgen validate $f --dtype $d 2>&1 | tail -4
  done; done > $OUT/validate.log 2>&1
) > $OUT/gpu1.txt 2>&1 &
CUDA_VISIBLE_DEVICES=0 gpu_tests ops.log 60 tests/test_ops.py
CUDA_VISIBLE_DEVICES=0 gpu_tests autocast.log 280 tests/test_autocast_dtype_gpu.py
wait
cat $OUT/gpu1.txt; grep -E "^==|PASS|FAIL|error" $OUT/validate.log | head -30
t "KernelBench eval bf16, all 36, two GPUs, alone"
PRECISIONS=bf16 GPUS=2 EVAL_LIMIT=200 bash scripts/device_kernelbench.sh 2>&1 | grep -v "^---.*done" | tail -4
t done
