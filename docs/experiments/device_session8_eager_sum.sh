# Session 8 (H100): row sums in eager's order (kernels/eager_sum.cuh) for the cuBLAS fp32 files.
# torch.sum's bits against the kernel over the shapes that change torch's configuration, then
# KernelBench 14 (cancelling row sums; eager fp32 is itself 2e-2 from fp64): its cuBLAS fp32 file
# through KernelBench's eval, then `kgen search` on it (the search keeps that variant for an
# ill-conditioned module) and KernelBench's eval of its winner.
. scripts/device_setup.sh >/dev/null
TESTS="tests/test_eager_sum_gpu.py" LOG=eager_sum_tests LIMIT=200 bash scripts/device_gpu_tests.sh
t "kernelbench 14, the cuBLAS fp32 file"
mkdir -p /tmp/w14
python3 -m kgen.cli generate .kb/level2/14_Gemm_Divide_Sum_Scaling.py --backend cublas --math fp32_simt \
  -o /tmp/w14/14_Gemm_Divide_Sum_Scaling.py > $OUT/kb14_generate.log 2>&1; echo "generate exit $?"
timeout 150 python3 scripts/kernelbench_corpus.py --kb .kb --files /tmp/w14 --precision fp32 \
  .kb/level2/14_Gemm_Divide_Sum_Scaling.py > $OUT/kb14_cublas_eval.log 2>&1
grep "^|" $OUT/kb14_cublas_eval.log | cut -c1-400
NUMS=14 SEARCH_LIMIT=240 EVAL_LIMIT=120 bash scripts/device_kernelbench_search.sh
t done
