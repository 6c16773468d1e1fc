"""The search plot, drawn from a synthetic record (CPU; skipped where matplotlib is absent, and
the message without it is tested either way)."""

import json
import sys

import pytest
from click.testing import CliRunner

from kgen.cli import main
from kgen.tune import plot


def candidate(name, math, ms, error, passing, backend="kgen", eager=2.8, eager_tf32=0.4):
    return {"name": name, "spec": {"math": math, "backend": backend}, "status": "passed" if passing else "incorrect",
            "passing_tols": passing,
            "measured": {"median_ms": ms, "max_abs_err": error, "eager_ms": eager, "eager_tf32_ms": eager_tf32}}


RECORD = {
    "search": "m_b1024_i8192_o8192", "device": "NVIDIA H100 80GB HBM3", "tols": [1e-4, 1e-2],
    "candidates": [
        candidate("accurate_fast", "tf32x3", 1.1, 6e-6, [1e-4, 1e-2], eager=2.7),
        candidate("accurate_slow", "fp32_simt", 3.0, 5e-6, [1e-4, 1e-2], eager=2.9),
        candidate("tf32", "tf32", 0.38, 2e-3, [1e-2], backend="cublas", eager_tf32=0.5),
        candidate("rewrite", "fp32_simt", 0.05, 0.0, [1e-4, 1e-2], backend="gemv"),
        {"name": "pruned", "spec": {"math": "bf16"}, "status": "pruned", "detail": "cost model"},
    ],
    "winners": {"0.0001": {"name": "accurate_fast"}, "0.01": {"name": "tf32"}},
}


def test_the_points_and_lines_come_from_the_record():
    points = {p["name"]: p for p in plot.candidate_points(RECORD)}
    assert sorted(points) == ["accurate_fast", "accurate_slow", "rewrite", "tf32"]   # pruned: never ran
    assert points["rewrite"]["math"] == "gemv" and points["rewrite"]["error"] == plot.ZERO_ERROR_AT
    assert points["tf32"]["passing_tols"] == [1e-2]
    lines = plot.eager_lines(RECORD)
    assert lines["eager fp32"] == pytest.approx(2.8)          # the median of 2.7, 2.9, 2.8, 2.8
    assert lines["eager TF32"] == pytest.approx(0.4)
    assert lines["3xTF32 floor: 3x eager TF32"] == pytest.approx(1.2)
    # a search of the module in bf16: eager in bf16 alone (its eager_ms), no fp32 or TF32 lines
    assert plot.eager_lines({**RECORD, "dtype": "bf16"}) == {"eager bf16": pytest.approx(2.8)}


def test_a_panel_per_tier_with_its_winner_marked(tmp_path):
    pytest.importorskip("matplotlib")
    fig = plot.figure(RECORD)
    axes = fig.axes
    assert [ax.get_title() for ax in axes] == ["tol 0.0001", "tol 0.01"]
    for ax, winner_ms in zip(axes, ("1.100", "0.380")):
        labels = ax.get_legend_handles_labels()[1]
        assert f"winner {winner_ms} ms" in labels
        assert {"eager fp32 2.800 ms", "eager TF32 0.400 ms", "3xTF32 floor: 3x eager TF32 1.200 ms"} <= set(labels)
    # the TF32 file fails the 1e-4 tier and passes the 1e-2 one
    assert "tf32: failed this tier" in axes[0].get_legend_handles_labels()[1]
    assert "tf32: passed" in axes[1].get_legend_handles_labels()[1]
    out, drew = plot.plot_record(RECORD, tmp_path / "sub" / "p.png")
    assert drew and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert plot.png_text(out)[plot.DIGEST_KEY] == plot.plot_digest(RECORD)
    assert plot.plot_record(RECORD, out) == (out, False)      # the same record: left as it is


def png_with_text(path, fields: dict) -> None:
    """A 1x1 PNG with the given tEXt fields (zlib and struct alone: no matplotlib here)."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    texts = b"".join(chunk(b"tEXt", k.encode("latin-1") + b"\0" + v.encode("latin-1")) for k, v in fields.items())
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)) + texts
                     + chunk(b"IDAT", zlib.compress(b"\0\0")) + chunk(b"IEND", b""))


def test_a_plot_drawn_from_the_same_record_is_not_drawn_again(tmp_path, monkeypatch):
    """A search's rerun writes the same record: its PNG, which names the record's digest, is left
    as it is (no matplotlib); another record, another format, or a PNG of other origin is drawn."""
    drawn = []

    class Figure:
        def savefig(self, path, dpi, metadata):
            drawn.append((path.name, metadata))
            png_with_text(path, metadata or {})

    monkeypatch.setattr(plot, "figure", lambda record: Figure())
    target = tmp_path / "p.png"
    png_with_text(target, {"Software": "someone else's"})
    assert plot.plot_record(RECORD, target) == (target, True)
    assert drawn == [("p.png", {plot.DIGEST_KEY: plot.plot_digest(RECORD)})]
    assert plot.plot_record(RECORD, target) == (target, False) and len(drawn) == 1
    changed = json.loads(json.dumps(RECORD))
    changed["candidates"][0]["measured"]["median_ms"] = 1.05
    assert plot.plot_digest(changed) != plot.plot_digest(RECORD)
    assert plot.plot_record(changed, target) == (target, True) and len(drawn) == 2
    assert plot.plot_record(changed, tmp_path / "p.svg")[1] and drawn[-1] == ("p.svg", None)
    assert plot.png_text(tmp_path / "missing.png") == {} and plot.png_text(tmp_path / "p.svg") == {}
    # a PNG cut short (a write interrupted after the text field) or damaged is drawn again
    whole = target.read_bytes()
    assert plot.png_text(target)
    for broken in (whole[:len(whole) - 14], whole[:-1], whole.replace(b"IDAT", b"IDAt")):
        target.write_bytes(broken)
        assert plot.png_text(target) == {}
        assert plot.plot_record(changed, target) == (target, True)


def test_kgen_plot_draws_a_record_file_beside_it(tmp_path):
    pytest.importorskip("matplotlib")
    record = tmp_path / "search_m.json"
    record.write_text(json.dumps(RECORD))
    r = CliRunner().invoke(main, ["plot", str(record)])
    assert r.exit_code == 0, r.output
    assert f"plot: {tmp_path / 'search_m.png'}" in r.output
    assert (tmp_path / "search_m.png").read_bytes()[:4] == b"\x89PNG"


def test_without_matplotlib_one_line_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)      # import matplotlib now fails
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    record = tmp_path / "search_m.json"
    record.write_text(json.dumps(RECORD))
    r = CliRunner().invoke(main, ["plot", str(record), "-o", str(tmp_path / "p.png")])
    assert r.exit_code == 1 and "pip install 'kgen[plot]'" in r.output and "Traceback" not in r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["search_m.json"]


@pytest.mark.parametrize("content, args, phrase", [
    ("{", (), "is not a search record (JSON)"),
    ('{"winners": {}}', (), "is not a search record (no candidates)"),
    (json.dumps(RECORD), ("-o", "p.txt"), "a plot is written as .png, .svg, .pdf"),
])
def test_kgen_plot_refuses_what_it_cannot_draw(tmp_path, content, args, phrase):
    record = tmp_path / "search_m.json"
    record.write_text(content)
    r = CliRunner().invoke(main, ["plot", str(record), *args])
    assert r.exit_code == 2 and phrase in r.output and "Traceback" not in r.output, r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["search_m.json"]
