# Session 18: the shipped tier's last three tests (tests/test_gpu.py and tests/test_faults.py,
# from 60), which the earlier calls' limits left unrun.
python3 -m pytest -m gpu --collect-only -q tests/test_gpu.py tests/test_faults.py 2>/dev/null | grep "::" > /tmp/shipped_ids
timeout 200 python3 -m pytest -m gpu -q $(tail -n +60 /tmp/shipped_ids) > $OUT/gpu_shipped_last.log 2>&1; tail -3 $OUT/gpu_shipped_last.log
