# Session 11, third device call (the change it measured was reverted: docs/perf.md, session 11):
# the epilogue parameters and running buffers of a 16-bit module converted by one launch each
# (_foreach_copy_) instead of one per tensor. The bf16 forwards
# kernel by kernel (as device_session11_ab.sh's profile), the 16-bit GPU tests of every module
# of tests/refs (forward, running buffers, full gate), torch.compile / CUDA graphs, and
# KernelBench's eval at bf16. Carry .kb (KernelBench).
. scripts/device_setup.sh
files=/tmp/s11_bf16; mkdir -p $files
for r in $(for n in 84 33 97 12; do ls .kb/level2/${n}_*.py; done); do kgen generate $r --dtype bf16 -o $files/$(basename $r) --force > /dev/null; done
for f in $files/*.py; do (timeout 400 python3 -m kgen.tune.worker build --dtype bf16 $f > /dev/null 2>&1 || echo "build failed: $f") & done; wait
t "profile, bf16, under no_grad"
python3 scripts/profile_forward.py --dtype bf16 --eager --iters 20 $files/*.py 2>&1 | grep -v "warn" > $OUT/profile_bf16_casts.log; grep -v "eager ref" $OUT/profile_bf16_casts.log | cut -c1-120
t "gpu tests"
timeout 330 python3 -m pytest -m gpu -q -n 4 tests/test_custom_ops.py tests/test_half_gpu.py -k "compile or forward_and_buffers or full_gate" > $OUT/gpu_tests_casts.log 2>&1; tail -4 $OUT/gpu_tests_casts.log
t "KernelBench eval, bf16"
NUMS="33 84 97 30" PRECISIONS=bf16 EVAL_LIMIT=170 bash scripts/device_kernelbench.sh 2>&1 | grep -v "^NVIDIA\|Successfully\|^---" | tail -8
t done
