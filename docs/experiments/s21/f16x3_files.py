"""Writes, beside kgen's default fp32 file of a module, the same file with its forward GEMM on
kgen/codegen/kernels/gemm_wgmma_f16x3.cuh (an experiment before the math mode exists in the
search): the tf32x3 wgmma GEMM's type in the `using Gemm` line replaced, the f16x3 header inlined
before the module's part. The backward's GEMMs (BackwardGemm) stay tf32x3.

    python3 docs/experiments/s21/f16x3_files.py BASE.py OUT_PREFIX [STAGES:FLUSH ...]
"""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
HEADER = (ROOT / "kgen/codegen/kernels/gemm_wgmma_f16x3.cuh").read_text().replace("#pragma once\n", "")


def variant(text: str, stages: int, flush: int) -> str:
    gemm = re.search(r"using Gemm = std::conditional_t<std::is_same<kgen_operand_t, float>::value, "
                     r"(kgen::WgmmaWsGemm<kgen::MathMode::kTF32x3, (\d+), (\d+), \d+, \d+, (\d+), false>),", text)
    assert gemm, "no tf32x3 wgmma forward GEMM in this file"
    bm, bn, group = gemm.group(2), gemm.group(3), gemm.group(4)
    text = text.replace(gemm.group(1), f"kgen::WgmmaWsF16x3Gemm<{bm}, {bn}, {stages}, {flush}, {group}>", 1)
    marker = "// ---- GEMM part 0 of"
    assert text.count(marker) == 1
    return text.replace(marker, HEADER + "\n" + marker, 1)


if __name__ == "__main__":
    base, prefix, *configs = sys.argv[1:]
    text = Path(base).read_text()
    for c in configs or ["3:1"]:
        stages, flush = (int(v) for v in c.split(":"))
        out = Path(f"{prefix}_s{stages}_f{flush}.py")
        out.write_text(variant(text, stages, flush))
        print(out)
