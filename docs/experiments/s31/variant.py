"""Make an experimental variant of an emitted file: the 16-bit GEMM's BN, stages and CTAs per SM."""
import re, sys
src, dst, bn, stages, blocks = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
s = open(src).read()
s, n = re.subn(r"WgmmaWsHalfGemm<kgen_operand_t, (\d+), 256, 4, (\d+)>", rf"WgmmaWsHalfGemm<kgen_operand_t, \1, {bn}, {stages}, \2>", s)
assert n == 1, n
i = s.index("wgmma_half_kernel(const __grid_constant__")
j = s.rindex("__launch_bounds__(Gemm::kThreads, 1)", 0, i)
s = s[:j] + f"__launch_bounds__(Gemm::kThreads, {blocks})" + s[j + len("__launch_bounds__(Gemm::kThreads, 1)"):]
open(dst, "w").write(s)
if len(sys.argv) > 6:   # also write the CUDA source
    start = s.index("_KGEN_CUDA_SOURCE = r'''") + len("_KGEN_CUDA_SOURCE = r'''")
    open(sys.argv[6], "w").write(s[start:s.index("'''", start)])
