"""Session 17: variants of the few-rows GEMM (kernels/gemm_skinny.cuh) as text edits of an emitted
file, to find what limits its stream over w at batch 7 (issue 25, item 2).

    python3 docs/experiments/s17/skinny_variants.py FILE.py OUTDIR

writes OUTDIR/<stem>_<variant>.py for each variant below. Every variant computes the same
result (they change the schedule of the loads, not the math).
"""

import pathlib
import sys

LOAD = """    return streamed ? __ldcs(reinterpret_cast<const uint4*>(p)) : __ldg(reinterpret_cast<const uint4*>(p));"""
# w's loads with an L2 prefetch of the whole 256-byte block around them (DRAM pages read in
# larger pieces), still past L1.
LOAD_L2_256 = """    if (streamed) {
      uint4 r;
      asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
      return r;
    }
    return __ldg(reinterpret_cast<const uint4*>(p));"""

# Two k-blocks in flight ahead of the one being multiplied, instead of one.
LOOP = """    uint4 xa, xb, wv[kBlocksN];
    fetch(warp, xa, xb, wv);
#pragma unroll 1
    for (int b = warp; b < k_blocks; b += kWarps) {
      uint4 next_xa, next_xb, next_wv[kBlocksN];
      fetch(b + kWarps, next_xa, next_xb, next_wv);"""
LOOP_DEPTH2 = """    uint4 xa, xb, wv[kBlocksN], mid_xa, mid_xb, mid_wv[kBlocksN];
    fetch(warp, xa, xb, wv);
    fetch(warp + kWarps, mid_xa, mid_xb, mid_wv);
#pragma unroll 1
    for (int b = warp; b < k_blocks; b += kWarps) {
      uint4 next_xa, next_xb, next_wv[kBlocksN];
      fetch(b + 2 * kWarps, next_xa, next_xb, next_wv);"""
SHIFT = """      xa = next_xa;
      xb = next_xb;
#pragma unroll
      for (int j = 0; j < kBlocksN; ++j) wv[j] = next_wv[j];"""
SHIFT_DEPTH2 = """      xa = mid_xa;
      xb = mid_xb;
      mid_xa = next_xa;
      mid_xb = next_xb;
#pragma unroll
      for (int j = 0; j < kBlocksN; ++j) {
        wv[j] = mid_wv[j];
        mid_wv[j] = next_wv[j];
      }"""

VARIANTS = {
    "base": [],
    "l2pf": [(LOAD, LOAD_L2_256)],
    "depth2": [(LOOP, LOOP_DEPTH2), (SHIFT, SHIFT_DEPTH2)],
    "depth2_l2pf": [(LOAD, LOAD_L2_256), (LOOP, LOOP_DEPTH2), (SHIFT, SHIFT_DEPTH2)],
    "bn2": [("static constexpr int kBlocksN = 4;", "static constexpr int kBlocksN = 2;")],
    "warps16": [("  static constexpr int kWarps = 8;\n  static constexpr int kThreads = 32 * kWarps;\n  static constexpr int kBlocksN = 4;",
                 "  static constexpr int kWarps = 16;\n  static constexpr int kThreads = 32 * kWarps;\n  static constexpr int kBlocksN = 4;")],
}


def main(path, outdir):
    text = pathlib.Path(path).read_text()
    out = pathlib.Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    for name, edits in VARIANTS.items():
        t = text
        for old, new in edits:
            assert t.count(old) == 1, (name, old[:60], t.count(old))
            t = t.replace(old, new)
        target = out / f"{pathlib.Path(path).stem}_{name}.py"
        target.write_text(t)
        print(target)


if __name__ == "__main__":
    main(*sys.argv[1:])
