# What session 30 leaves for the next session's device time (issue 24). Two calls, ~12 min.
#
# Call 1 (~7 min): the GPU check session 30 could not finish on its final code (63e749a: the
# generated epilogue applied as the tile is stored where no statistics are taken; BatchNorm
# epilogues on the registers as at b7844e6), then KernelBench's eval at bf16 on all 36 files.
#   GPU_TESTS_LIMIT=330 GPU_TESTS="tests/test_refs_gpu.py tests/test_skinny_gpu.py -rfEx" \
#     PRECISIONS=bf16 bash scripts/device_kernelbench.sh          (carry .kb)
# test_refs_gpu.py holds session 30's new test_an_odd_width_stores_one_value_at_a_time (out
# width 301: the stores' one-value path, with the chain applied), not yet run on a GPU.
#
# Call 2 (~4 min), two open questions:
# (a) Is the scaled-residual module's bf16 failure at width 301 (session 30, call H: KernelBench's
#     replay against the fp32 reference at 1e-2 fails; kgen's error 0.68x eager bf16's) the same at
#     b7844e6? Generate `tests/refs/matmul_scale_residual.py --batch 257 --in 528 --out 301` at
#     b7844e6 (a worktree, PYTHONPATH, run from outside the repository) and here, and
#     `kgen validate FILE --dtype bf16` both. If both fail alike, the gate's KernelBench replay is
#     judging eager fp32's own error at that width, not kgen's.
# (b) WsEpilogue's tile pads rows by 4 floats (kLdt = BN + 4): a half-warp's float2 writes of the
#     accumulators (rows i = 0..3 at banks 4i + 2q) meet two to a bank; Nsight Compute at K = 64
#     reported 43 % excess shared-memory wavefronts. BN + 8 puts them on banks 8i + 2q: conflict
#     free. The change: in kgen/codegen/kernels/gemm_wgmma_ws.cuh `kLdt = BN + 8`, and in
#     kgen/tune/spec.py wgmma_smem_bytes' epilogue term `tile.bm * (tile.bn + 8) * 4` (its mirror;
#     epilogue_smem_bytes stays the other families'). A/B KernelBench 12 / 99 / 84 in bf16 and 12 in
#     fp32 against 63e749a's files with scripts/compare_forward.py, and the GEMM at K = 64
#     (`kgen generate .kb/level2/12_*.py --dtype bf16 --in 64`; 63e749a: 0.018 ms, cuBLAS 0.008), or
#     the whole line: `PYTHONPATH=. python3 scripts/gemm_k_sweep.py .kb/level2/12_*.py --dtype bf16`
#     (session 30's measurements by hand: 0.031 ms + 0.0200 per 1024 of K, cuBLAS 0.005 + 0.0204).
#
# After that, what stands between the 16-bit GEMM and cuBLAS's at 1024 x 8192 -> 8192 (perf.md,
# session 30): ~5 us a wave around the mainloop (one CTA per tile: the next tile's loads wait for
# this one's epilogue; cuBLAS's persistent kernel overlaps them), and at 128 x 16384 -> 16384 w read
# at ~60 % of DRAM's rate against cuBLAS's ~83 %.
echo "a plan, not a script: read it"
