# Chained GEMMs on one GPU (logs under $OUT): the GPU tier of the modules named in TEST_REFS
# (tests/test_refs_gpu.py; the chain at an odd shape on both GEMM families and at its
# KernelBench shape), then `kgen search --tol 1e-4` of the chained module and `kgen bench
# --compile` of the winner (eager fp32 and torch.compile in the same run).
. scripts/device_setup.sh
t "refs ${TEST_REFS:-sigmoid_gemm}"
KGEN_TEST_REFS=${TEST_REFS:-sigmoid_gemm} timeout ${REFS_LIMIT:-300} python3 -m pytest -m gpu -q tests/test_refs_gpu.py > $OUT/gpu_refs.log 2>&1
tail -8 $OUT/gpu_refs.log
r=gemm_sigmoid_gemm_lse
t "search $r"
timeout ${SEARCH_LIMIT:-200} python3 -m kgen.cli search tests/refs/$r.py --tol 1e-4 --math tf32x3 --top ${TOP:-2} > $OUT/search_$r.log 2>&1
grep -E "fastest valid|no candidate|FAIL|passed|error" $OUT/search_$r.log | tail -8
f=$(ls generated/${r}_*tol0.0001.py 2>/dev/null | head -1)
[ -n "$f" ] && timeout 150 python3 -m kgen.cli bench "$f" --compile > $OUT/bench_$r.log 2>&1
[ -n "$f" ] && tail -8 $OUT/bench_$r.log
tar czf $OUT/results.tgz generated results
t done
