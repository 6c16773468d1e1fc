# The GPU test tier in one device call (logs under $OUT): the synthesis path's modules
# (tests/test_refs_gpu.py: every reference of tests/refs/ at an odd shape on both GEMM families
# and at its KernelBench shape), then the shipped problems' tier and the planted faults
# (SHIPPED_TESTS selects a part), then the script THEN names, if any.
. scripts/device_setup.sh
t refs
gpu_tests gpu_refs.log ${REFS_LIMIT:-330} tests/test_refs_gpu.py
t shipped
gpu_tests gpu_shipped.log ${SHIPPED_LIMIT:-230} ${SHIPPED_TESTS:-tests/test_gpu.py tests/test_faults.py}
[ -n "${THEN:-}" ] && bash $THEN
t done
