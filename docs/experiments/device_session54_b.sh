# Session 54, call B: the C++ autograd node for fp32 modules' eager training. Host time piece by
# piece (s54/host_parts.py), the file of before (ab/h) and after (ab/h2), on the two-layer head,
# a 128 x 512 -> 256 -> 10 MLP and 8192 x 1024 -> 16; then the gate (kgen validate: training
# steps through the node) on the head and the MLP; then GPU tests of the node in fp32 and bf16.
source scripts/device_setup.sh
mkdir -p $OUT
t build
(build_files ab/h builds_old.log & build_files ab/h2 builds_new.log & python3 -c "
import sys; sys.path.insert(0, 'ab/h2'); from kgen.check.loading import EmittedFile
EmittedFile('ab/h2/small_mlp_fp32.py').module._kgen_native_module()" > $OUT/node_build.log 2>&1; wait)
for r in two_layer_head small_mlp 8192_1024_16; do
  for v in h h2; do
    t "$r $v"
    python3 docs/experiments/s54/host_parts.py ab/h/ref_$r.py ab/$v/${r}_fp32.py fp32 > $OUT/host_${r}_$v.md 2>&1
    grep -E "kgen forward|eager forward|part_call" $OUT/host_${r}_$v.md
  done
done
t validate
for r in two_layer_head small_mlp; do
  timeout 120 python3 -m kgen validate ab/h2/${r}_fp32.py > $OUT/validate_$r.log 2>&1; echo "validate $r: $?"; tail -4 $OUT/validate_$r.log
done
t "gpu tests"
KGEN_TEST_REFS=gemm_bn_bias_div_swish,gemm_mul_leakyrelu,gemm_bn_gelu_relu,matmul_gelu_softmax,gemm_groupnorm_hardtanh,gemm_sigmoid_gemm_lse,gemm_dropout_scale_softmax gpu_tests gpu_node.log 200 tests/test_half_gpu.py -k cpp_node
gpu_tests gpu_backward.log 150 tests/test_backward_gpu.py tests/test_keep_z_gpu.py
t done
