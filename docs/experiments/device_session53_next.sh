# What session 52 leaves for the next session's device time (issues 24, 25).
#
# Session 52: on trust, a batch small enough for w in registers is handed the kept split only once
# w's version held for a call (a training forward on trust at 128 rows paid w's pass every call:
# 55 4723 -> 1825 us, untrusted 1759); the kept split's Python only in fp16x3 files; inputs the
# module flattens into its Linear's features (x.view(x.size(0), -1), flatten(1), nn.Flatten);
# x's split a warp a row at K <= 1024 (37's x pass 144 -> 67 us, the same bits); the shape rule's
# fp16x3 below its harmonic where K >= 1024 and N >= 16 at more than 256 rows (measured files; the
# rule itself is Python, CPU-tested).
#
# 1. x's pass at rows of 2048 (KernelBench 45: 16384 rows, 241 us for 268 MB, ~1.1 TB/s): apply
#    docs/experiments/s52/short_rows_2048.patch (a warp a row, 16 quads a lane, 93 registers),
#    then as call H did: s49/same_bits.py and s49/kernel_times.py on 45's file before and after,
#    and the gate at K = 2040 (add ("gemm_mul_leakyrelu", 1000, ["--in", "2040", "--out", "512"])
#    to test_fp16x3's gate cases).
# 2. x's and w's pass at rows of 4096 (39: the pass 178 us of ~2950 against ~126 at bandwidth): the
#    block kernel's 52 registers leave four 16 KB rows in flight an SM; two rows a block, or a
#    smaller block a row, measured with s50/split_bench.py's harness.
# 3. Narrow outputs: at N <= 32 eager's cuBLAS fp32 GEMM beat both of kgen's (1024 x 1024 -> 32:
#    16.4 against 16.5 us; 8192 x 1024 -> 16: 28.0 against 37.5; 16384 x 256 -> 32: 15.2 against
#    19.7): measure `--backend cublas` there, and whether the rule should take it.
# 4. From earlier plans: the rule's harmonic at K = 512; the search's cost-model rates (session
#    25's); a 16-bit module's kept z in its own dtype; 55's 1e-2 search; issue 24's and 25's H100
#    goals (an H100 needed).
echo "a plan, not a script: read it"
