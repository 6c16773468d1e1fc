# Session 33, call C: the GPU tier of this session's changes: the hyperparameter guard under
# torch.compile(fullgraph) and CUDA graphs (test_custom_ops: GroupNorm and softmax references,
# whose forwards now start with the guard), S in the module's 16-bit dtype for row kernels (the
# row modules of tests/refs in bf16 and fp16 at the gate, fusion 0 against 1 bit for bit, eager's
# sums), GroupNorm's Welford products (forward) beside the backward's divisions, and the fp32 row
# modules' odd shapes (their row function's reads changed in form).
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
R=softmax,lse,groupnorm,layernorm,sum,pool,normalize
t "gpu tests"
gpu_tests c_custom_ops.log 300 tests/test_custom_ops.py > $OUT/sum_custom_ops.txt &
KGEN_TEST_REFS=$R gpu_tests c_half.log 400 tests/test_half_gpu.py -k "forward_and_buffers or full_gate" > $OUT/sum_half.txt &
gpu_tests c_fusion0.log 200 tests/test_fusion0.py > $OUT/sum_fusion0.txt &
gpu_tests c_eager_sum.log 300 tests/test_eager_sum_gpu.py > $OUT/sum_eager.txt &
wait
KGEN_TEST_REFS=$R gpu_tests c_refs.log 250 tests/test_refs_gpu.py -k "odd_shape" > $OUT/sum_refs.txt &
gpu_tests c_backward.log 250 tests/test_backward_gpu.py -k "groupnorm or softmax or lse" > $OUT/sum_backward.txt &
wait
for f in $OUT/sum_*.txt; do echo "== $f"; cat $f; done
t done
# KernelBench 66 in training mode: call B's same_bits.py drew a new dropout mask for each file
# (now reseeded before each forward); the files before and after, again.
A=docs/experiments/s33/ab
(for f in $A/kb66_*.py; do python3 -c "
import sys; from kgen.check.loading import EmittedFile; import torch
f = EmittedFile(sys.argv[1]); f.build(torch.bfloat16)" $f & done; wait) > $OUT/c_build.log 2>&1
timeout 60 python3 docs/experiments/s32/same_bits.py .kb/level2/66_*.py $A/kb66_before.py $A/kb66_after.py --dtype bf16 2>&1 | tail -2 | tee $OUT/c_same_bits_66.log
t done
