# What session 34 leaves for the next session's device time (issues 24, 25).
#
# 0. (~4 min, one GPU) What session 34 changed after its device time was spent: the whole 16-bit
#    GPU tier, whose fixtures now build fp32, bf16 and fp16 in parallel (7e29a3c; time the run
#    against session 34's calls D and E, which their limits cut), and a bf16 search's cold wall
#    time with its candidates built for bf16 up front:
#      gpu_tests half.log 400 tests/test_half_gpu.py
#      time kgen search ../shared/kernelbench/level2/12_*.py --dtype bf16 --results-dir /tmp/r
#    (d2d0a35 and af8f26b leave the measured files' PTX unchanged byte for byte; their fixed paths,
#    a tile of 96 columns over one warp and a module reading its BatchNorm's running mean, have
#    not run on a GPU.)
#
# 1. (~500 s, nvidia-h200-x4 where lent) KernelBench's eval at bf16 and fp16 on all 36 files at
#    session 34's code (the epilogue's operands read once a thread: 37 1.124 -> 1.053 ms, 45 0.829 -> 0.777,
#    the 1024x8192->8192 files 2-3 %; docs/perf.md, session 34), for the family's medians against
#    eager and max-autotune (session 33, call E: 1.069x / 1.083x the faster of the two):
#      GPUS=4 KB_FLAGS="--autotune" PRECISIONS="bf16 fp16" EVAL_LIMIT=250 bash scripts/device_kernelbench.sh
#
# 2. What still stands between kgen and max-autotune in bf16, largest first:
#    a. The 16-bit GEMM's epilogue is not overlapped (one CTA an SM). Session 34's ping-pong form
#       (docs/experiments/wgmma_half_pingpong.patch) was correct and slower at both warpgroup
#       tiles it fits (64 x 256, 128 x 128): more operand traffic per product, and one
#       warpgroup's epilogue on 4 warps hides no latency. Left: clusters of two multicasting w's
#       tile, so that 64 x 256 a warpgroup reads what 128 x 256 reads.
#    b. The epilogue's instructions: 37's GEMM still issues 211 M warp instructions (~50 a value)
#       for a chain of ~12 fp32 operations; each rounding to the module's dtype is a cvt and a
#       shift (a packed cvt.rn.bf16x2.f32 rounds two), and each accurate division a slow-path
#       branch.
#    c. Fusion 0 for row modules (37, 45, 99: a point-wise chain before a GroupNorm / reduction):
#       the GEMM stores the Linear's output, the row kernel applies the chain as it reads S.
#       lower.forward.deferred_store refuses row modules today.
#    d. The matrix-vector rewrite has no 16-bit build (generator.half_gemm_type is the wgmma
#       family's alone): in bf16, KernelBench 18 and 51 run the whole GEMM (0.212 and 0.509 ms;
#       max-autotune 0.202 and 0.388), where in fp32 the rewrite reads w once (0.098 / 0.174 ms,
#       0.036x / 0.031x eager fp32, session 20). A bf16 gemv build (w and x read in the module's
#       dtype, fp32 sums, the row's chain rounded as torch's ops round) would read 128 MB of w:
#       ~0.03-0.05 ms for 51. It is more exact than eager (no rounding of each element of z
#       before the sum), so the gate's yardstick holds; KernelBench's replay at 1e-2 decides.
echo "a plan, not a script: read it"
