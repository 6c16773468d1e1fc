# Session 41, call E: the GPU tests of the final code: the 16-bit tier (every module's forward,
# buffers, gradients through the C++ node, the full gate, odd K; not the forward-only output-type
# tests) and the fp32 backward (whose Python vjp's expressions are now written from op_gradients).
# Run as: timeout 450 bash THIS; cd $OUT && tar cf /tmp/x.tar * && find . -mindepth 1 -delete && mv /tmp/x.tar $OUT/
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
t "gpu tests"
gpu_tests t_half.log 220 tests/test_half_gpu.py -k "not output_written"
gpu_tests t_backward.log 180 tests/test_backward_gpu.py
t done
