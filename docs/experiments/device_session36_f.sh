# Session 36, call F (the rewrite's parameter gradients evaluated at the dR-weighted mean of z):
# the rewrite's backward tests, the full gate in fp32 / bf16 / fp16 on its four modules.
unset PYTHONDONTWRITEBYTECODE
. scripts/device_setup.sh
gpu_tests gemv.log 150 tests/test_gemv_backward.py
t done
cd $OUT && tar cf /tmp/f.tar * && rm -f * && mv /tmp/f.tar $OUT/f.tar
