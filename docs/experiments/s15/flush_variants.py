"""Variants of an emitted file's tf32x3 WgmmaWsGemm for the flush of the partial accumulators
(session 15, issues 21 and 25: KernelBench 55/56/59 at 128x32768->32768 sit on issue 21's 0.50x
line, and the flush every FLUSH k-tiles waits for every product in flight).

    python docs/experiments/s15/flush_variants.py EMITTED.py OUTDIR [VARIANT ...]

Writes OUTDIR/<stem>_<variant>.py:
  base         unchanged (FLUSH 2)
  flush3       FLUSH 3
  flush4       FLUSH 4
  flush8       FLUSH 8
  nowait (diag) the flush adds the partial without waiting for its products (wrong values): what
               any flush that does not drain the pipeline could save at most

(Tried first and dropped, session 15: two partial accumulators, one flushed while the next
FLUSH k-tiles add into the other, with the producer's registers moved to the consumers
(setmaxnreg 40 / 232): three 64-register sets per thread spill even at 240 registers, and ptxas
serializes the wgmmas (C7514) when an accumulator set is read after a wait_group 1.)
"""

import pathlib
import sys

INST_PREFIX = "kgen::WgmmaWsGemm<kgen::MathMode::kTF32x3, "

FLUSH_WAIT = """          if (fresh) {
            wgmma_detail::wait<0>();
            wgmma_detail::fence_regs(part);"""


def once(text, old, new):
    n = text.count(old)
    assert n == 1, f"{n} matches of {old[:60]!r}"
    return text.replace(old, new)


def with_flush(text, flush):
    """Every tf32x3 WgmmaWsGemm instantiation of the file with FLUSH = flush."""
    out, at = [], 0
    while True:
        i = text.find(INST_PREFIX, at)
        if i < 0:
            break
        j = text.index(">", i)
        args = text[i + len(INST_PREFIX):j].split(", ")
        args[3] = str(flush)   # BM, BN, STAGES, FLUSH, GROUP_M[, ANY_K]
        out.append(text[at:i] + INST_PREFIX + ", ".join(args))
        at = j
    assert out, "no tf32x3 WgmmaWsGemm in this file"
    return "".join(out) + text[at:]


def variant(text, name):
    if name == "base":
        return text
    if name.startswith("flush"):
        return with_flush(text, int(name[len("flush"):]))
    if name == "nowait":
        return once(text, FLUSH_WAIT, FLUSH_WAIT.replace("wgmma_detail::wait<0>();", ""))
    raise SystemExit(f"unknown variant {name}")


VARIANTS = ["base", "flush3", "flush4", "flush8", "nowait"]

if __name__ == "__main__":
    src, outdir = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    outdir.mkdir(parents=True, exist_ok=True)
    text = src.read_text()
    for name in sys.argv[3:] or VARIANTS:
        path = outdir / f"{src.stem}_{name}.py"
        path.write_text(variant(text, name))
        print(path)
