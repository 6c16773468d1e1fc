# What session 31 leaves for the next session's device time (issues 24, 25).
#
# 1. (~7 min) The checks session 31 could not finish: the odd-width test in its corrected form
#    (KernelBench's bf16 replay passes, or fails only where the file is no further from fp64 than
#    eager bf16: tests/test_refs_gpu.py) and the end of tests/test_half_gpu.py (95 of its ~100 ran in
#    session 31's call D, no failure). The odd-width test alone took over 200 s in call E (its fixture
#    builds every spec of the two modules), so give it room:
#      KGEN_TEST_REFS=swish_scale,mul_leakyrelu GPU_TESTS="tests/test_refs_gpu.py -k odd_width" \
#        GPU_TESTS_LIMIT=420 PRECISIONS= bash scripts/device_kernelbench.sh
#    (gpu_tests in scripts/device_setup.sh now logs one line per test: a run cut at its limit says
#    which tests passed.) And session 31's padding of a 16-bit module's K to a multiple of 8 (2d564bb:
#    such modules were refused before), never run on a GPU:
#      GPU_TESTS="tests/test_half_gpu.py::test_in_features_that_are_no_multiple_of_8 tests/test_constant_gpu.py" \
#        GPU_TESTS_LIMIT=400 PRECISIONS= bash scripts/device_kernelbench.sh
#    And the (..., in_features) inputs taken as their rows (e2f527c), never run on a GPU:
#      GPU_TESTS="tests/test_rows_input_gpu.py" GPU_TESTS_LIMIT=300 PRECISIONS= bash scripts/device_kernelbench.sh
#
# 2. Issue 24's yardstick on all 36 files, never measured beyond three (session 12): kgen against
#    the faster of eager and torch.compile(mode="max-autotune") in bf16 (and fp16). max-autotune's
#    compiles do not fit one GPU's call for 36 files; deal them out over a 4-GPU host (the table and
#    its medians merged by scripts/kernelbench_corpus.py --merge):
#      GPUS=4 KB_FLAGS="--compile --autotune" PRECISIONS=bf16 EVAL_LIMIT=540 \
#        bash scripts/device_kernelbench.sh        (kind nvidia-h200-x4, carry .kb)
#
# 3. What stands between the 16-bit GEMM and cuBLAS's (docs/perf.md, sessions 30 and 31): ~5 us a
#    wave outside the mainloop at 1024 x 8192 -> 8192 (K = 64: 0.018 ms against 0.008), 0.850 ms
#    against cuBLAS's ~0.68 at KernelBench 39's shape with the statistics fused. Ruled out so far:
#    the store loop's latency (batched stores), the epilogue tile's bank conflicts (pad 8), smaller
#    tiles two to an SM (64 x 128: the GEMM 1.5x slower), a persistent kernel prefetching one
#    k-tile during the epilogue (session 27). What the arithmetic says is left (session 31): the
#    epilogue must run while the tensor cores work, and with the 128 x 256 tile (the only one at
#    cuBLAS's mainloop rate) its fp32 tile (130 KB) and four stages (192 KB) do not both fit in
#    shared memory. So: apply the chain in the consumers' registers with the tile's per-column
#    operands staged in shared memory first (by the producer's idle warps 1-3 during the mainloop:
#    session 30's register form was slow only for its operand loads), round to the module's dtype
#    there, write 64 KB of bf16 (stmatrix, swizzled) and store it by TMA, asynchronously, in a
#    persistent kernel whose producer fills the next tile's stages meanwhile. The BatchNorm
#    modules' statistics would then come from the registers too (column_stats, as the fp32 build
#    takes them). Before that, cheaper: tile_column_stats leaves 128 of the 384 threads idle at
#    BN = 256 (~3 us a tile of 39's epilogue by the PTX's count; all threads: ~2 us).
echo "a plan, not a script: read it"
