# What session 45 leaves for the next session's device time (issues 24, 25).
#
# Session 45: fp16 products of fp32 operands (--math fp16 on the wgmma backend: the round16 GEMM,
# kernels/gemm_wgmma_round16.cuh, on fp16's wgmma instructions; TF32's 11 significant bits at the
# 16-bit rate, within |v| <= 65504): KernelBench 12 in the 1e-2 tier on kgen's own GEMM, 0.272 ms
# (0.10x eager fp32, 0.67x eager TF32) on an H200; the tier's search over the 36 files: kgen's
# GEMM wins 26 (bf16 16, fp16 10); then CTAs of one tile at batches of at most 128 rows (55 1.51 ->
# 1.13 ms, 68 0.39 -> 0.28, past cuBLAS BF16). docs/perf.md, session 45.
#
# 0. The GPU tests session 45's review added and no device time was left to run (call G's script):
#      bash docs/experiments/device_session45_g.sh   (products at 100 rows; fp16 at K % 8 != 0)
#    and the whole round16 test once: gpu_tests x.log 400 tests/test_wgmma_round16_gpu.py
# 1. The 1e-2 searches of 56, 59 (55's shape) and 66 (68's) again with the one-tile CTA (not run:
#    no device time left), and KernelBench 12's 1e-2 search on an H100 (the goal's device):
#      for n in 56 59 66; do kgen search $(ls .kb/level2/${n}_*.py) --tol 1e-2 --math tf32 \
#        --math bf16 --math fp16 --out-dir $OUT/s$n --results-dir $OUT/s$n; done
# 2. torch.autocast on the round16 GEMM (session 44's plan, item 1: the fp32 weight kept, no
#    per-call conversion of W: 0.08 ms of KernelBench 12's 0.349 under autocast). Read in session 45
#    (not started: no device time to verify it). The simplest form: for an fp32 module inside
#    autocast, the round16 GEMM already computes what autocast's Linear does (T(x) T(w) in fp32,
#    both rounded to nearest) from fp32 x and fp32 w, so the build for autocast need not convert
#    either in Python:
#    - a build flag (say -DKGEN_FP32_OPERANDS, with KGEN_OPERAND=T and KGEN_AUTOCAST as now): a new
#      C type for BASE_ARGS' x and w (generator.BASE_ARGS, kernel.cu.j2's typedefs: float there,
#      kgen_operand_t elsewhere), forward.cuh's run_stage1 / forward_impl taking it (launch_gemv and
#      launch_constant_output are templates on the pointer type: they instantiate for float), and
#      kgen_cfg::Gemm in that build = kgen::WgmmaWsRound16Gemm<T, 128, 128, 3, 8> whatever the
#      variant's fp32 GEMM (its tile is fixed; a K % 8 != 0 part keeps the conversion path);
#    - model_new.py.j2: _kgen_autocast_input and _kgen_checked_param(operand=True) leave x and W
#      fp32 where that build exists (an fp32 module, autocast's dtype bf16 or fp16); _kgen_build's
#      key gains the flag; the output dtype logic (_kgen_autocast_output) is unchanged;
#    - the backward: dx = dz W and dW = dz^T x in autocast's dtype from the saved fp32 W and x
#      (the Python vjp converts them where it now reads the converted copies; native_backward.cpp's
#      node likewise), dW returned in fp32 as autocast's Linear returns it;
#    - tests: test_compile's half builds gain the flag (no spills), the CPU stand-ins of the
#      entry's argument types; on the GPU test_half_gpu -k autocast, test_kernelbench_autocast_gpu,
#      test_custom_ops' compile / CUDA-graph test under autocast; then s43/autocast_table.py
#      (median 0.889x eager autocast before).
# 3. The round16 GEMM's small loose ends: K % 4 instead of % 8 (x's rows are padded to 32: GPU-test
#    129 x 260), the accumulators zeroed in the consumer branch (after setmaxnreg), split-K or the
#    one-tile CTA for a few hundred rows of a narrow output (the rule is M <= 128 today).
# 4. Issue 24's H100 goals and issue 25 (both need an H100): 84/30 <= 0.22 ms in bf16, 39 <= 0.80,
#    the family median <= 0.75x; the bf16 training step; fp32-exact nearer the floor.
echo "a plan, not a script: read it"
