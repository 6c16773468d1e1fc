# Session 40, call D: the GPU tests of the backward at this tree: a 16-bit build's kernels read g
# and write dz in the module's dtype where a point-wise kernel is the first to read or the last
# to write them (else its C entry converts fp32 copies), no GEMM of its own and no workspace for
# one; the fp32 build's workspace reordered (the GEMMs' segments last).
# Run as: timeout 570 bash THIS; cd $OUT && tar cf /tmp/x.tar * && find . -mindepth 1 -delete && mv /tmp/x.tar $OUT/
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
t "backward (fp32, cuBLAS)"
gpu_tests t_backward.log 210 tests/test_backward_gpu.py tests/test_cublas_backward_gpu.py
t "16-bit"
gpu_tests t_half.log 190 tests/test_half_gpu.py
t "custom ops, bench --training, the rewrite's 16-bit file, fusion 0"
gpu_tests t_misc.log 150 tests/test_custom_ops.py tests/test_bench_training_gpu.py tests/test_gemv_half.py tests/test_fusion0.py
t done
