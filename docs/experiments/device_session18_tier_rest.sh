# Session 18: the GPU tier after x as the tf32x3 operand, resumed where device_gpu_tier.sh's limits cut it (refs from test 55, the shipped tier from 18), then split-K and the few-rows GEMM.
. scripts/device_setup.sh
python3 -m pytest -m gpu --collect-only -q tests/test_refs_gpu.py 2>/dev/null | grep "::" > /tmp/refs_ids
python3 -m pytest -m gpu --collect-only -q tests/test_gpu.py tests/test_faults.py 2>/dev/null | grep "::" > /tmp/shipped_ids
wc -l /tmp/refs_ids /tmp/shipped_ids
t "refs from 55"
timeout 200 python3 -m pytest -m gpu -q $(tail -n +55 /tmp/refs_ids) > $OUT/gpu_refs_rest.log 2>&1; tail -3 $OUT/gpu_refs_rest.log
t "shipped from 18"
timeout 250 python3 -m pytest -m gpu -q $(tail -n +18 /tmp/shipped_ids) > $OUT/gpu_shipped_rest.log 2>&1; tail -3 $OUT/gpu_shipped_rest.log
t "split-k, skinny"
timeout 120 python3 -m pytest -m gpu -q tests/test_split_k_gpu.py tests/test_skinny_gpu.py > $OUT/gpu_splitk.log 2>&1; tail -3 $OUT/gpu_splitk.log
t done
