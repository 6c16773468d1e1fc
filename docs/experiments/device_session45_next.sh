# What session 44 leaves for the next session's device time (issues 24, 25).
#
# Session 44: kgen's own bf16 GEMM for fp32 modules (--backend wgmma --math bf16,
# kernels/gemm_wgmma_bf16.cuh): w TMA-loaded as fp32 and rounded to bf16 in the consumers'
# registers (wgmma's A operand), x rounded by a pass that permutes k (conflict-free reads of w),
# setmaxnreg for two wgmmas a group. KernelBench 12 0.276 ms (0.675x eager TF32, the cuBLAS TF32
# file 0.384); the 1e-2 tier's winner for 84 (0.307 ms) and 76 (0.266), not for 12 or the BatchNorm
# files (bf16's rounding misses 1e-2 on torch.randn: the probe now drops it). docs/perf.md, session 44.
#
# 1. torch.autocast on the new GEMM (the largest win left for autocast: W's per-call conversion,
#    0.08 ms of KernelBench 12's 0.349 under autocast, and eager autocast pays it too). Today the
#    build for autocast converts x and W in Python (_kgen_checked_input, _kgen_checked_param with
#    operand=True) and runs the 16-bit GEMM. The design:
#    - a third build for an fp32 weight under autocast (the op's `autocast` argument 2, a
#      -DKGEN_FP32_WEIGHT build): the C entry's w is `const float*` (OPERAND_TYPES gets a "weight"
#      kind: Param's type in that build, Operand's elsewhere), x still converted in Python;
#    - WgmmaWsBf16Gemm templated on the 16-bit type (fp16 autocast: __floats2half2_rn and
#      Wgmma16<__half, 256>) and taking a 16-bit x (its pass then a permuting 16-bit copy), a few
#      rows on SkinnyGemm with mixed operand types, K % 8 padding of both as now;
#    - the backward keeps W fp32 (saved as the op's input: no bf16 copy held) and converts it for
#      dx = dz W in the Python vjp and in native_backward.cpp's node; dW comes back in fp32;
#    - every path that takes w gets its type: BASE_ARGS' w, entry.cuh's arguments, forward.cuh's
#      run_stage1 and forward_impl, whose gemv and constant-output branches (a wgmma file's
#      rewritten parts) read w too: those parts keep the 16-bit w (their `if constexpr` branches
#      are not template-dependent, so a float w there must still type-check);
#    - tests: the autocast GPU tests (test_half_gpu -k autocast, test_kernelbench_autocast_gpu,
#      test_custom_ops' compile/CUDA-graph test under autocast) and the CPU stand-in tests of the
#      dtypes each entry gets; then s43/autocast_table.py again (median 0.889x before).
#      gpu_tests x.log 330 tests/test_kernelbench_autocast_gpu.py tests/test_half_gpu.py -k autocast
# 2. The bf16 GEMM at small batches: no split-K (128 x 8192 -> 8192 is 32 CTAs of 256 x 128); a
#    128-row CTA or split-K would let it serve a few hundred rows.
# 3. Issue 24's H100 goals and issue 25 (both need an H100): 84/30 <= 0.22 ms in bf16, 39 <= 0.80,
#    the family median <= 0.75x; KernelBench 12's 0.30 ms in the 1e-2 tier (the bf16 file meets it
#    on the H200 but fails the tier's gate on torch.randn; cuBLAS TF32 0.384 wins the tier).
# 4. Session 43's items 2-4 (KB14 under autocast 8.5x: a cuBLAS file without a 16-bit build; the
#    torch.compile column of the autocast table; the slowest autocast steps 99, 45, 12).
echo "a plan, not a script: read it"
