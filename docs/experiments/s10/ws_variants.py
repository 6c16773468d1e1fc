"""Variants of an emitted file's warp-specialized tf32x3 GEMM (WgmmaWsGemm), by text edits, for
timing on the GPU (session 10, issue 25 item 1: where the mainloop's ~16 % idle tensor time goes).

    python docs/experiments/s10/ws_variants.py EMITTED.py OUTDIR

Writes OUTDIR/<stem>_<variant>.py. Diagnostic variants compute wrong results on purpose (they
remove work to see what it costs); the others are candidates and must pass validation:
  base        unchanged
  noprep      (diag) the producer's B small part is not computed
  twoprod     (diag) two products per k-step instead of three
  onea        (diag) A loaded and split once per k-tile, 12 wgmmas in one group per k-tile
  flush4      FLUSH 4 instead of 2
  group16     raster group 16 instead of 8
  tilegroup   A for the whole k-tile in registers, its 12 wgmmas in one commit group, the
              wait per k-tile; registers moved from the producer warpgroup to the consumers
              (setmaxnreg 40 / 232) to hold two k-tiles of A fragments
  tilegroup_f4  tilegroup with FLUSH 4
  tma_small   (diag) no preparation; TMA copies w's tile a second time into the small-part buffer:
              the shared-memory traffic of a small part split once in global memory (wrong values)
  tma_small_f4  (diag) tma_small with FLUSH 4
"""

import pathlib
import sys

INST = "std::is_same<kgen_operand_t, float>::value, kgen::WgmmaWsGemm<kgen::MathMode::kTF32x3, 128, 128, 4, 2, 8>"


def once(text, old, new):
    n = text.count(old)
    assert n == 1, f"{n} matches of {old[:60]!r}"
    return text.replace(old, new)


def ws_part(text):
    """(head, ws, tail): the WgmmaWsGemm struct's text is ws (edits apply to it only)."""
    start = text.index("struct WgmmaWsGemm {")
    end = text.index("\n};", start)
    return text[:start], text[start:end], text[end:]


PREP = "          prepare_b(generic(b_stage(s)), generic(small_buf(s)), ptid);\n"

KSTEP_LOOP_START = """#pragma unroll
        for (int ks = 0; ks < kKSteps; ++ks) {
          uint32_t raw[4], hi[4], lo[4];"""

THREE = """            Mma::mma(part, lo, b_desc + k_off, ks == 0 && fresh ? 0 : 1);
            Mma::mma(part, hi, s_desc + k_off, 1);
            Mma::mma(part, hi, b_desc + k_off, 1);"""

TWO = """            Mma::mma(part, hi, s_desc + k_off, ks == 0 && fresh ? 0 : 1);
            Mma::mma(part, hi, b_desc + k_off, 1);"""

# The consumer's k-tile body from the k-step loop to the end of the flush (tf32x3 only).
OLD_BODY_START = KSTEP_LOOP_START
OLD_BODY_END = """          if (ks == 0 && kt > 0) {
            // Only this k-step's group may still run: k-tile kt - 1 is done with its stage.
            __syncwarp();
            if (lane == 0) ws_detail::mbar_arrive(empty((kt - 1) % STAGES));
          }
        }"""

TILEGROUP_BODY = """        // A of the whole k-tile into registers and split, then its 12 wgmmas as one group.
        uint32_t hi[kKSteps][4], lo[kKSteps][4];
#pragma unroll
        for (int ks = 0; ks < kKSteps; ++ks) {
          uint32_t raw[4];
          mma_detail::ldsm_x4(a_base + ((a_chunk ^ (2 * ks)) << 4), raw[0], raw[1], raw[2], raw[3]);
#pragma unroll
          for (int i = 0; i < 4; ++i) mma_detail::split_tf32(raw[i], hi[ks][i], lo[ks][i]);
        }
        wgmma_detail::fence();
#pragma unroll
        for (int ks = 0; ks < kKSteps; ++ks) {
          const uint64_t k_off = static_cast<uint64_t>(ks * 2);
          Mma::mma(part, lo[ks], b_desc + k_off, ks == 0 && fresh ? 0 : 1);
          Mma::mma(part, hi[ks], s_desc + k_off, 1);
          Mma::mma(part, hi[ks], b_desc + k_off, 1);
        }
        wgmma_detail::commit();
        // Only this k-tile's group may still run: k-tile kt - 1 is done with its stage.
        wgmma_detail::wait<1>();
        if (kt > 0) {
          __syncwarp();
          if (lane == 0) ws_detail::mbar_arrive(empty((kt - 1) % STAGES));
        }"""

ONEA_BODY = TILEGROUP_BODY.replace(
    "for (int ks = 0; ks < kKSteps; ++ks) {\n          uint32_t raw[4];",
    "for (int ks = 0; ks < 1; ++ks) {\n          uint32_t raw[4];").replace(
    "lo[ks], b_desc", "lo[0], b_desc").replace("hi[ks], s_desc", "hi[0], s_desc").replace(
    "hi[ks], b_desc", "hi[0], b_desc")

PRODUCER_START = """    if (wg == 0) {
      if (warp == 0) {
        if (lane == 0) {"""
CONSUMER_START = """    } else {
      const int cwg = wg - 1;"""
MAINLOOP_END = """      wgmma_detail::wait<0>();
      wgmma_detail::fence_regs(acc);
    }
"""


def body_replace(ws, new_body):
    a = ws.index(OLD_BODY_START)
    b = ws.index(OLD_BODY_END, a) + len(OLD_BODY_END)
    return ws[:a] + new_body + ws[b:]


def setmaxnreg(ws, producer=40, consumer=232, after=168):
    ws = once(ws, PRODUCER_START,
              f'    if (wg == 0) {{\n      asm volatile("setmaxnreg.dec.sync.aligned.u32 {producer};\\n");\n'
              + PRODUCER_START[len("    if (wg == 0) {\n"):])
    ws = once(ws, CONSUMER_START,
              CONSUMER_START + f'\n      asm volatile("setmaxnreg.inc.sync.aligned.u32 {consumer};\\n");')
    # Back to one register count for the epilogue, which every thread runs.
    producer_end = """          ws_detail::mbar_arrive(ready(s));
        }
      }
"""
    ws = once(ws, producer_end, producer_end + f'      asm volatile("setmaxnreg.inc.sync.aligned.u32 {after};\\n");\n')
    ws = once(ws, MAINLOOP_END, MAINLOOP_END.replace(
        "fence_regs(acc);\n", f'fence_regs(acc);\n      asm volatile("setmaxnreg.dec.sync.aligned.u32 {after};\\n");\n'))
    return ws


def variant(text, name):
    head, ws, tail = ws_part(text)
    if name == "base":
        pass
    elif name == "noprep":
        ws = once(ws, PREP, "")
    elif name == "twoprod":
        ws = once(ws, THREE, TWO)
    elif name == "onea":
        ws = body_replace(ws, ONEA_BODY)
        ws = setmaxnreg(ws)
    elif name.startswith("tma_small"):
        ws = once(ws, PREP, "")
        ws = once(ws, "ws_detail::mbar_arrive_expect_tx(full(s), kABytes + kBBytes);",
                  "ws_detail::mbar_arrive_expect_tx(full(s), kABytes + 2 * kBBytes);")
        ws = once(ws, "            ws_detail::tma_load(b_stage(s), map_w, full(s), (k_first + kt) * BK, n0);\n",
                  "            ws_detail::tma_load(b_stage(s), map_w, full(s), (k_first + kt) * BK, n0);\n"
                  "            ws_detail::tma_load(small_buf(s), map_w, full(s), (k_first + kt) * BK, n0);\n")
    elif name in ("flush4", "group16"):
        pass
    elif name.startswith("tilegroup"):
        ws = body_replace(ws, TILEGROUP_BODY)
        ws = setmaxnreg(ws)
    else:
        raise SystemExit(f"unknown variant {name}")
    out = head + ws + tail
    if name in ("flush4", "tilegroup_f4", "tma_small_f4"):
        out = once(out, INST, INST.replace("4, 2, 8>", "4, 4, 8>"))
    if name == "group16":
        out = once(out, INST, INST.replace("4, 2, 8>", "4, 2, 16>"))
    return out


VARIANTS = ["base", "noprep", "twoprod", "onea", "flush4", "group16", "tilegroup", "tilegroup_f4",
            "tma_small", "tma_small_f4"]

if __name__ == "__main__":
    src, outdir = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    names = sys.argv[3:] or VARIANTS
    outdir.mkdir(parents=True, exist_ok=True)
    text = src.read_text()
    for name in names:
        path = outdir / f"{src.stem}_{name}.py"
        path.write_text(variant(text, name))
        print(path)
