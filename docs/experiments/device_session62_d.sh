# Session 62, call D (nvidia-h200): call C's four failures again (tests/test_prologue_gpu.py's gates
# of a point-wise prologue, gelu_linear and dropout_head, fp32 and bf16) after KeepZEpilogue's mend.
. scripts/device_setup.sh
gpu_tests d.log 200 -n 4 tests/test_prologue_gpu.py -k "gelu_linear or dropout_head"
t done
