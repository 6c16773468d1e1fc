# Session 18: the rest of the shipped tier (from test 49) and of split-K / few rows (from 25),
# where device_session18_tier_rest.sh's limits cut them.
. scripts/device_setup.sh
python3 -m pytest -m gpu --collect-only -q tests/test_gpu.py tests/test_faults.py 2>/dev/null | grep "::" > /tmp/shipped_ids
python3 -m pytest -m gpu --collect-only -q tests/test_split_k_gpu.py tests/test_skinny_gpu.py 2>/dev/null | grep "::" > /tmp/split_ids
wc -l /tmp/shipped_ids /tmp/split_ids
t "split-k, skinny from 25"
timeout 100 python3 -m pytest -m gpu -q $(tail -n +25 /tmp/split_ids) > $OUT/gpu_splitk_rest.log 2>&1; tail -3 $OUT/gpu_splitk_rest.log
t "shipped from 49"
timeout 270 python3 -m pytest -m gpu -q $(tail -n +49 /tmp/shipped_ids) > $OUT/gpu_shipped_rest2.log 2>&1; tail -3 $OUT/gpu_shipped_rest2.log
t done
