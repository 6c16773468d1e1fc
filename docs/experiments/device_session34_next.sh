# What session 33 leaves for the next session's device time (issues 24, 25).
#
# 1. (~3 min) The GPU checks session 33 could not run (its device time was spent): the review's
#    fixes after call G (docs/perf.md, session 33):
#      - a row stage that is a pooling alone: tests/refs/gemm_sigmoid_avgpool.py (added for it; its
#        name matches KGEN_TEST_REFS=pool below) through the GPU tier in fp32, bf16 and fp16;
#      - the hyperparameter guard's new cases under torch.compile(fullgraph) and CUDA graphs:
#        tests/test_custom_ops.py -m gpu (its GroupNorm and softmax references guard);
#      - KernelBench 30 (16 groups of 512: a warp a group again) and 37 / 88 (8 lanes, the
#        constant-count Welford loop) at the final code: same_bits.py against 34fcbae's files and
#        compare_forward.py (call G measured 37 1.122 ms, 88 0.254).
#    Then the GPU tier of the GroupNorm and row modules:
#      R=softmax,lse,groupnorm,layernorm,sum,pool,normalize
#      KGEN_TEST_REFS=$R pytest -m gpu tests/test_half_gpu.py -k "forward_and_buffers or full_gate"
#      KGEN_TEST_REFS=$R pytest -m gpu tests/test_refs_gpu.py -k odd_shape
#      pytest -m gpu tests/test_backward_gpu.py -k "groupnorm or softmax or lse"
#
# 2. What stands between kgen and max-autotune in bf16 (docs/perf.md, session 33), largest first:
#    a. The 16-bit GEMM's epilogue is not overlapped with any mainloop (one CTA an SM, 164
#       registers; no two-CTA form fits: session 33's setmaxnreg attempt, session 31's 128 x 128).
#       KernelBench 37 (K = 1024): GEMM 0.79 ms against cuBLAS's ~0.38; 45's first GEMM (K = 2048)
#       0.545 against ~0.35. A persistent ping-pong kernel (two consumer warpgroups, 64 x 256 each)
#       helps long K (12, 84: K = 8192) only; at short K the epilogue itself must get cheaper or
#       move (a store of z + bias in bf16 from the registers, the chain in the row kernel, which
#       runs at full occupancy: 37's row kernel is instruction-bound at 88 % SM throughput).
#    b. The row kernel's instructions (37: ~650 a thread a row for 8 elements): 256 threads a row
#       measured 1.156 -> 1.129 ms on 37 (call F); time it on the other row modules (45, 66, 84,
#       99) before changing row_threads.
# (scripts/device_setup.sh's build_files DIR LOG builds an A/B's files at once: the loop session
# 32's and 33's scripts wrote out each time.)
echo "a plan, not a script: read it"
