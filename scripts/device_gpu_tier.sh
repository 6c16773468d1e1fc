# The GPU test tier in one device call (logs under $OUT): the synthesis path's modules
# (tests/test_refs_gpu.py: every reference of tests/refs/ at an odd shape on both GEMM families
# and at its KernelBench shape), then the shipped problems' tier and the planted faults
# (SHIPPED_TESTS selects a part), then the script THEN names, if any.
. scripts/device_setup.sh
t refs
timeout ${REFS_LIMIT:-330} python3 -m pytest -m gpu -q tests/test_refs_gpu.py > $OUT/gpu_refs.log 2>&1
tail -12 $OUT/gpu_refs.log
t shipped
timeout ${SHIPPED_LIMIT:-230} python3 -m pytest -m gpu -q ${SHIPPED_TESTS:-tests/test_gpu.py tests/test_faults.py} > $OUT/gpu_shipped.log 2>&1
tail -12 $OUT/gpu_shipped.log
[ -n "${THEN:-}" ] && bash $THEN
t done
