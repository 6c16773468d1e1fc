# What session 51 leaves for the next session's device time (issues 24, 25).
#
# Session 51: KernelBench's eval at fp32 on all 36 (35 of 36: 66's Dropout masks, as always);
# fp16x3's w in registers up to 256 rows (was 512) and the rule's harmonic refitted to the kept
# split (M N / (M + N / 2) >= 224); ModelNew.kgen_trust_weight_versions(), an opt-in that skips
# w's read while its version counter is unchanged (12 at 1024 rows 670 -> 598 us of kernels, 55 at
# 128 rows 1740 -> 1364). Not GPU-run: 1dc2908, the review's mends of the trust code in the Python
# around the kernels (the record written after the launch, whose counter and which stream in it,
# no split handed at small batches where none is kept, 64-bit sizes). Run first:
#   tests/test_w_split_gpu.py (18: the trust tests at 200 and 1024 rows among them)
#   tests/test_custom_ops.py -m gpu (captures and torch.compile, which the record's stream meets)
#   and re-time 12 / 55 trusted as call F did (s49/kernel_times.py, s51/w_in_registers_rows.py with
#   S51_AS_EMITTED=1 and a copy whose _KGEN_TRUST_WEIGHT_VERSIONS line says True).
#
# 1. On trust, a training forward at <= 256 rows splits w on every call (the version moves each
#    step): measure it against w in registers (55 at 128 rows: ~1.2 ms of pass against ~0.37 ms
#    of the registers' extra mainloop), and if it matters, hand the split at those batches only
#    once w's version has held for a call (the bits then depend on history: decide first).
# 2. w's pass at short rows (39: 4096 rows of 16 KB, latency-bound): two rows a block, or 128
#    threads a row below 4096 columns; s50/split_bench.py's harness.
# 3. The rule's harmonic below 241 (unmeasured: tf32x3 stays there) and the search's cost model
#    rates (session 25's) against session 51's table.
# 4. From earlier plans: a 16-bit module's kept z in its own dtype (gradients against fp64 first);
#    55's 1e-2 search; issue 24's and 25's H100 goals (an H100 needed).
echo "a plan, not a script: read it"
