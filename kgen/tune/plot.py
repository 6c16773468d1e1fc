"""A search record as a picture: every measured candidate's time against its error vs fp64, one
panel per tolerance tier, the tier's winner marked, eager PyTorch's times as lines.

A function of the record's JSON alone (no GPU, no kgen state), so `kgen plot RECORD.json` redraws
any record and `kgen search` draws its own at the end. matplotlib is an optional extra
(`pip install 'kgen[plot]'`); without it PlotUnavailable says how to get it.
"""

from __future__ import annotations

import hashlib
import json
import statistics
import struct
import zlib
from pathlib import Path

INSTALL_HINT = "pip install 'kgen[plot]'"
FORMATS = (".png", ".svg", ".pdf")
# One colour per GEMM arithmetic (the gemv rewrite computes in fp32 FFMA without a GEMM).
MATH_COLOURS = {"fp32_simt": "tab:blue", "tf32x3": "tab:green", "fp16x3": "tab:olive", "tf32": "tab:orange",
                "bf16": "tab:red", "fp16": "tab:pink"}
GEMV_COLOUR = "tab:purple"
# Where an error of exactly 0 (an output the rewrites prove constant) is drawn on the log axis.
ZERO_ERROR_AT = 1e-12


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed; the message says how to install it."""


def candidate_points(record: dict) -> list[dict]:
    """The measured candidates of a record: name, math, time (ms), max abs error vs fp64 and
    the tiers they passed. Pruned ones and those that never ran have no point."""
    points = []
    for c in record.get("candidates") or []:
        m = c.get("measured") or {}
        error = m.get("max_abs_err", c.get("validation_max_abs"))
        if m.get("median_ms") is None or error is None:
            continue
        spec = c.get("spec") or {}
        math = "gemv" if spec.get("backend") == "gemv" else spec.get("math", "?")
        points.append({"name": c.get("name", "?"), "math": math, "ms": m["median_ms"],
                       "error": max(error, ZERO_ERROR_AT),
                       "passing_tols": [float(t) for t in c.get("passing_tols") or []]})
    return points


def eager_lines(record: dict) -> dict[str, float]:
    """Times drawn as vertical lines (ms): eager fp32 and eager TF32 (the medians over the
    candidates' same-run measurements), and 3x eager TF32: the 3xTF32 floor, three TF32
    products per fp32 one at the rate eager TF32 runs the module (a guide, not a bound: it
    counts eager's non-GEMM work three times too, and a winner can come in under it). A search
    of a module in bf16 / fp16 draws eager in that dtype alone."""
    measured = [c.get("measured") or {} for c in record.get("candidates") or []]
    lines = {}
    dtype = record.get("dtype", "fp32")
    if dtype != "fp32":
        eager = [m["eager_ms"] for m in measured if m.get("eager_ms")]
        return {f"eager {dtype}": statistics.median(eager)} if eager else {}
    fp32 = [m["eager_ms"] for m in measured if m.get("eager_ms")]
    tf32 = [m["eager_tf32_ms"] for m in measured if m.get("eager_tf32_ms")]
    if fp32:
        lines["eager fp32"] = statistics.median(fp32)
    if tf32:
        lines["eager TF32"] = statistics.median(tf32)
        lines["3xTF32 floor: 3x eager TF32"] = 3 * statistics.median(tf32)
    return lines


# The PNG text field that names what a plot was drawn from (plot_digest).
DIGEST_KEY = "kgen-plot"


def plot_digest(record: dict) -> str:
    """A digest of everything figure() draws from the record, and of this module's code."""
    tols = sorted(float(t) for t in (record.get("tols") or record.get("winners") or []))
    drawn = {"points": candidate_points(record), "tols": tols, "lines": eager_lines(record),
             "winners": {k: (v or {}).get("name") for k, v in (record.get("winners") or {}).items()},
             "search": record.get("search"), "device": record.get("device"),
             "code": hashlib.sha256(Path(__file__).read_bytes()).hexdigest()}
    return hashlib.sha256(json.dumps(drawn, sort_keys=True).encode()).hexdigest()[:24]


def png_text(path: Path) -> dict[str, str]:
    """The tEXt fields of a whole PNG file: {} for a file that is not one, and for one cut short
    or damaged (a chunk's CRC wrong, no IEND: a write that was interrupted), whose fields name a
    picture it does not hold."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return {}
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return {}
    fields, at = {}, 8
    while at + 12 <= len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        crc = data[at + 8 + length:at + 12 + length]
        if len(body) != length or len(crc) != 4 or struct.unpack(">I", crc)[0] != zlib.crc32(kind + body):
            return {}
        if kind == b"tEXt":
            key, _, value = body.partition(b"\0")
            fields[key.decode("latin-1")] = value.decode("latin-1")
        if kind == b"IEND":
            return fields
        at += 12 + length
    return {}


def plot_record(record: dict, path: Path) -> tuple[Path, bool]:
    """Draws the record to `path` (.png, .svg or .pdf); returns it and whether it drew. A PNG
    already drawn from the same record (its DIGEST_KEY field: a search's rerun) is left as it
    is, without matplotlib's import and drawing (~1 s)."""
    path = Path(path)
    if path.suffix.lower() not in FORMATS:
        raise ValueError(f"{path}: a plot is written as {', '.join(FORMATS)}")
    digest = plot_digest(record)
    png = path.suffix.lower() == ".png"
    if png and png_text(path).get(DIGEST_KEY) == digest:
        return path, False
    fig = figure(record)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, metadata={DIGEST_KEY: digest} if png else None)
    return path, True


def figure(record: dict):
    """The record's matplotlib Figure: one panel per tier."""
    try:
        from matplotlib.figure import Figure
        from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
    except ImportError:
        raise PlotUnavailable(f"matplotlib is not installed; `{INSTALL_HINT}` adds it") from None
    points = candidate_points(record)
    tols = sorted(float(t) for t in (record.get("tols") or record.get("winners") or [])) or [None]
    lines = eager_lines(record)
    fig = Figure(figsize=(7.2 * len(tols), 5.4), layout="constrained")
    axes = fig.subplots(1, len(tols), squeeze=False)[0]
    for ax, tol in zip(axes, tols):
        winner = ((record.get("winners") or {}).get(f"{tol:g}") or {}).get("name") if tol else None
        for math in sorted({p["math"] for p in points}):
            colour = MATH_COLOURS.get(math, GEMV_COLOUR)
            passed = [p for p in points if p["math"] == math and (tol is None or tol in p["passing_tols"])]
            failed = [p for p in points if p["math"] == math and p not in passed]
            if passed:
                ax.scatter([p["ms"] for p in passed], [p["error"] for p in passed], color=colour,
                           label=f"{math}: passed", s=24, zorder=3)
            if failed:
                ax.scatter([p["ms"] for p in failed], [p["error"] for p in failed], facecolors="none",
                           edgecolors=colour, label=f"{math}: failed this tier", s=24, zorder=3)
        for p in points:
            if p["name"] == winner:
                ax.scatter([p["ms"]], [p["error"]], marker="*", s=260, color="gold", edgecolors="black",
                           label=f"winner {p['ms']:.3f} ms", zorder=4)
        for (label, ms), style in zip(lines.items(), ("-", "--", ":")):
            ax.axvline(ms, color="black", linestyle=style, linewidth=1, label=f"{label} {ms:.3f} ms")
        if tol is not None:
            ax.axhline(tol, color="grey", linestyle="-.", linewidth=1, label=f"tolerance {tol:g}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        # Times as 0.5, 1, 2 (not 5x10^-1), labelled at 1-2-5 steps so that a narrow range has some.
        ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("median time (ms)")
        ax.set_ylabel("max abs error vs fp64" + (f" (0 drawn at {ZERO_ERROR_AT:g})"
                                                  if any(p["error"] == ZERO_ERROR_AT for p in points) else ""))
        ax.set_title(f"tol {tol:g}" if tol is not None else "all candidates")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle(f"kgen search {record.get('search', '')}\n{record.get('device', '?')}")
    return fig
