# GPU tests of the synthesis path and the planted faults (issue 9 and 12); logs under $OUT.
python3 -m pip install -e . --no-deps --no-build-isolation -q 2>&1 | tail -2
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 560 python3 -m pytest -m gpu -q -x tests/test_refs_gpu.py tests/test_faults.py tests/test_ops.py > $OUT/gpu_refs.log 2>&1
tail -30 $OUT/gpu_refs.log
