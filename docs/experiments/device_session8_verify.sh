# Session 8 (H100): the GPU tests this session's changes touch. The training check's new order
# (each model steps after its own backward, starts kept in host memory) and the kink probe's
# second difference as one gradient: the planted faults (issue 22: the training check must fail
# a forward and a backward fault), the full validation at odd shapes; the cuBLAS files'
# backward; KernelBench's eval on 14 (now the cuBLAS fp32 winner) and 56 (its search's winner).
. scripts/device_setup.sh >/dev/null
t "faults, cuBLAS backward, KernelBench 14 / 56"
timeout 330 python3 -m pytest -m gpu -v -rfEx tests/test_faults.py tests/test_cublas_backward_gpu.py \
  "tests/test_kernelbench_corpus.py::test_kernelbenchs_eval_accepts_the_generated_file[14]" \
  "tests/test_kernelbench_corpus.py::test_kernelbenchs_eval_accepts_the_generated_file[56]" > $OUT/verify_a.log 2>&1
grep -E "(FAILED|ERROR) " $OUT/verify_a.log | cut -c1-300 | head; tail -3 $OUT/verify_a.log
t "full validation at odd shapes"
timeout 200 python3 -m pytest -m gpu -v -rfEx tests/test_refs_gpu.py -k "odd_shape" > $OUT/verify_b.log 2>&1
grep -E "(FAILED|ERROR) " $OUT/verify_b.log | cut -c1-300 | head; tail -3 $OUT/verify_b.log
t done
