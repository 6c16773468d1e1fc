import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import torch
from click.testing import CliRunner

from kgen.codegen import generator
from kgen import cli
from kgen.cli import main
from kgen.tune.spec import Spec, Tile

from conftest import module_source

REFS = Path(__file__).parent / "refs"
NO_GPU = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU defaults")


def run(*args):
    return CliRunner().invoke(main, list(args))


def spec_of(path) -> dict:
    namespace: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    return namespace["KGEN_SPEC"]


@NO_GPU
def test_generate_defaults_to_the_fastest_accurate_family_and_says_why(tmp_path):
    out = tmp_path / "m.py"
    r = run("generate", "--in", "8192", "--out", "8192", "-o", str(out), "--results-dir", str(tmp_path))
    assert r.exit_code == 0, r.output
    ast.parse(out.read_text())
    s = spec_of(out)
    # (fp16x3: the split pays at 1024 x 8192 -> 8192; configs.fastest_family)
    assert (s["batch"], s["math"], s["backend"], s["arch"]) == (1024, "fp16x3", "wgmma", "sm_90a")
    assert "no GPU here, so the default target sm_90a" in r.output
    assert "fastest fp32-accurate family for sm_90a" in r.output and "512 tiles for 132 SMs" in r.output


@NO_GPU
def test_generate_of_fp16_products_says_their_range_and_the_header_too(tmp_path):
    """--math fp16 by the rule (no search has probed the module's operands): the GEMM is the
    Hopper one on fp16 products, and both the message and the file's header say where fp16's range
    ends; a bf16 file says nothing of it."""
    for math, n_in in (("fp16", "512"), ("bf16", "512"), ("fp16", "260")):
        out = tmp_path / f"{math}_{n_in}.py"
        r = run("generate", "--in", n_in, "--out", "256", "--batch", "64", "--math", math, "-o", str(out),
                "--results-dir", str(tmp_path))
        assert r.exit_code == 0, r.output
        assert (spec_of(out)["math"], spec_of(out)["backend"]) == (math, "wgmma")
        header = ast.get_docstring(ast.parse(out.read_text()))
        # (at K % 8 != 0 the GEMM runs tf32 products, fp32's range: the message says nothing of fp16's)
        assert ("beyond 65504 becomes infinite" in r.output) == (math == "fp16" and n_in == "512"), r.output
        assert ("an operand beyond 65504 becomes infinite" in header) == (math == "fp16" and n_in == "512")


@NO_GPU
def test_generate_for_a_16_bit_module_says_what_its_build_runs(tmp_path):
    """An fp32-accurate family's file for a bf16 module: the message and the header say that the
    module runs the file's 16-bit build, not the family's fp32 arithmetic (fp16x3's split)."""
    out = tmp_path / "m.py"
    r = run("generate", "--in", "8192", "--out", "8192", "--dtype", "bf16", "-o", str(out),
            "--results-dir", str(tmp_path))
    assert r.exit_code == 0, r.output
    assert spec_of(out)["math"] == "fp16x3"
    assert "a bf16 module runs the file's 16-bit build" in r.output
    header = ast.get_docstring(ast.parse(out.read_text()))
    line = next(line for line in header.splitlines() if line.startswith("16-bit:"))
    assert "wgmma GEMM on its 16-bit operands" in line and "CTA 128x256x64 in 4 stages" in line
    # an fp32 module's message and a variant with no 16-bit build say nothing of it
    r = run("generate", "--in", "8192", "--out", "8192", "-o", str(tmp_path / "f.py"), "--results-dir", str(tmp_path))
    assert "16-bit build" not in r.output
    r = run("generate", "--backend", "cublas", "--math", "tf32", "-o", str(tmp_path / "c.py"), "--force")
    assert r.exit_code == 0, r.output
    assert "16-bit:" not in (tmp_path / "c.py").read_text()


@NO_GPU
@pytest.mark.parametrize("arch", ["sm_80", "sm_86", "sm_89", "sm_120"])
def test_generate_defaults_elsewhere_to_the_mma_tf32x3_gemm_that_fits(tmp_path, arch):
    out = tmp_path / "m.py"
    r = run("generate", "--arch", arch, "-o", str(out), "--results-dir", str(tmp_path))
    assert r.exit_code == 0, r.output
    s = spec_of(out)
    assert (s["math"], s["backend"], s["arch"]) == ("tf32x3", "kgen", arch)
    assert f"--arch {arch}" in r.output


@NO_GPU
def test_generate_reuses_an_earlier_search_winner(tmp_path):
    winner = Spec.of("gemm_scale_bn", 1024, 8192, 8192, math="tf32x3", backend="wgmma", fusion=2,
                     tile=Tile(128, 64, 32, 16, 64, stages=6))
    slower = Spec.of("gemm_scale_bn", 1024, 8192, 8192, math="tf32x3", backend="wgmma", fusion=1,
                     tile=Tile(128, 128, 32, 16, 128, stages=4))
    record = {"winners": {
        "0.0001": {"name": winner.name(), "spec": winner.to_dict(),
                   "measured": {"median_ms": 1.0, "ratio": 0.36, "device": "NVIDIA H100"}},
        "0.01": {"name": "x", "spec": slower.to_dict(), "measured": {"median_ms": 0.3}}}}
    (tmp_path / "search_x.json").write_text(json.dumps(record))
    other_shape = dict(record, winners={"0.0001": dict(record["winners"]["0.0001"],
                                                       spec=dict(winner.to_dict(), batch=2048))})
    (tmp_path / "search_y.json").write_text(json.dumps(other_shape))
    (tmp_path / "search_broken.json").write_text("{not json")
    out = tmp_path / "m.py"
    r = run("generate", "-o", str(out), "--results-dir", str(tmp_path))
    assert r.exit_code == 0, r.output
    assert spec_of(out) == winner.to_dict()
    assert "winner of an earlier search" in r.output and "0.360x eager fp32" in r.output


def test_generate_names_the_variant_it_is_told(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = run("generate", "--problem", "gemm_bn_scale_softmax", "--in", "1000", "--out", "1000",
            "--batch", "7", "--math", "tf32x3", "--backend", "kgen", "--tile", "128x128x32",
            "--warp", "64x32", "--stages", "4", "--arch", "sm_80")
    assert r.exit_code == 0, r.output
    (path,) = (tmp_path / "generated").iterdir()
    assert path.name.startswith("gemm_bn_scale_softmax_b7_i1000_o1000_tf32x3_f1_t128x128x32_w64x32_s4")
    assert oct(path.stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def test_a_tile_without_stages_takes_the_most_that_fit(tmp_path):
    """--tile alone: the rule's stages where they fit, else the most that do (fp16x3's 64x128 at
    2048 x 1024 -> 32, where the rule's 64x64 tile has 6: 4 of 64x128's fit); --stages given is
    taken as it is, and a count that does not fit is an error saying so."""
    args = ("generate", "--problem", "gemm_scale_bn", "--batch", "2048", "--in", "1024", "--out", "32",
            "--math", "fp16x3", "--backend", "wgmma", "--tile", "64x128x32", "--arch", "sm_90a")
    r = run(*args, "-o", str(tmp_path / "a.py"))
    assert r.exit_code == 0, r.output
    assert spec_of(tmp_path / "a.py")["tile"]["stages"] == 4
    r = run(*args, "--stages", "6", "-o", str(tmp_path / "b.py"))
    assert r.exit_code == 2 and "bytes of shared memory" in r.output


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_generate_cublas_variant(tmp_path):
    r = run("generate", "--backend", "cublas", "--math", "tf32", "-o", str(tmp_path / "c.py"))
    assert r.exit_code == 0, r.output
    assert "CUBLAS_COMPUTE_32F_FAST_TF32" in (tmp_path / "c.py").read_text()


def test_backend_alone_takes_its_own_accurate_math(tmp_path):
    for backend, math in (("wgmma", "tf32x3"), ("kgen", "tf32x3"), ("cublas", "fp32_simt")):
        out = tmp_path / f"{backend}.py"
        r = run("generate", "--backend", backend, "--arch", "sm_90a", "-o", str(out))
        assert r.exit_code == 0, r.output
        assert spec_of(out)["math"] == math


@pytest.mark.parametrize("args, phrase", [
    (("--tile", "128x128"), "expected --tile like 128x128x32"),
    (("--warp", "64"), "expected --warp like 64x32"),
    (("--math", "fp32_simt", "--tile", "128x128x8", "--warp", "48x64"), "multiple of WM"),
    (("--backend", "cublas", "--tile", "128x128x8"), "cuBLAS chooses its own tiles"),
    (("--math", "fp32_simt", "--stages", "3"), "fp32_simt GEMM (SIMT) has no pipeline stages"),
    (("--math", "tf32x3", "--thread", "8x8"), "only the fp32_simt GEMM (SIMT) has a thread tile"),
    (("--backend", "kgen", "--tile", "100x100x8"), "BM=100 must be a multiple of 16"),
    (("--backend", "kgen", "--tile", "128x128x48"), "BK=48 must be 16, 32 or 64"),
    (("--backend", "wgmma", "--math", "fp32_simt"), "implements tf32x3, fp16x3, tf32, bf16, fp16, not fp32_simt"),
    (("--backend", "wgmma", "--math", "bf16", "--tile", "128x256x32"), "wgmma bf16 tiles are 128x128, got 128x256"),
    (("--in", "0"), "must be a positive integer"),
    (("--out", "my.py"), "-o/--output"),
    (("--batch", "1000000000"), "elements"),
    (("--in", "1000000000", "--out", "1000000000"), "elements"),
])
def test_generate_refuses_bad_requests_clearly(tmp_path, args, phrase):
    out = tmp_path / "x.py"
    r = run("generate", *args, "-o", str(out))
    assert r.exit_code == 2, r.output
    assert phrase in r.output
    assert "Traceback" not in r.output
    assert isinstance(r.exception, SystemExit)  # a usage error, not an exception escaping kgen
    assert not out.exists()


def test_tile_hints_are_valid_tiles(tmp_path):
    """The examples the format errors give are accepted."""
    r = run("generate", "--backend", "kgen", "--math", "tf32x3", "--tile", "128x128x32", "--warp",
            "64x32", "-o", str(tmp_path / "a.py"))
    assert r.exit_code == 0, r.output
    r = run("generate", "--math", "fp32_simt", "--thread", "8x8", "--warp", "32x64",
            "-o", str(tmp_path / "b.py"))
    assert r.exit_code == 0, r.output


def refused(r, phrase: str):
    """A usage error as kgen reports one: exit 2, the reason, no traceback."""
    assert r.exit_code == 2, r.output
    assert phrase in r.output, r.output
    assert "Traceback" not in r.output
    assert isinstance(r.exception, SystemExit)


def test_no_existing_file_is_replaced_without_force(tmp_path):
    readme = tmp_path / "mine.py"   # (a file that is no .py is refused, --force or not: test_cli_probe55)
    readme.write_text("mine")
    refused(run("generate", "-o", str(readme)), "pass --force")
    assert readme.read_text() == "mine"
    r = run("generate", "-o", str(readme), "--force")
    assert r.exit_code == 0 and "ModelNew" in readme.read_text()


def test_a_rerun_that_would_write_the_same_file_succeeds_and_says_so(tmp_path):
    out = tmp_path / "m.py"
    assert run("generate", "-o", str(out), "--results-dir", str(tmp_path)).exit_code == 0
    written = out.read_text()
    r = run("generate", "-o", str(out), "--results-dir", str(tmp_path))
    assert r.exit_code == 0 and f"unchanged {out}" in r.output, r.output
    # another variant into the same file is refused, and the file is kept
    refused(run("generate", "-o", str(out), "--results-dir", str(tmp_path), "--arch", "sm_80"),
            "differs from what kgen would write; pass --force")
    assert out.read_text() == written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.py"]


def test_o_names_a_folder_to_write_into(tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    r = run("generate", "-o", str(folder), "--results-dir", str(tmp_path))
    assert r.exit_code == 0, r.output
    (path,) = folder.iterdir()
    assert path.name.startswith("gemm_scale_bn_b1024_i8192_o8192_") and path.suffix == ".py"
    assert f"wrote {path}" in r.output
    # a folder that does not exist yet, named with a trailing slash
    r = run("generate", "-o", str(tmp_path / "new") + "/", "--results-dir", str(tmp_path))
    assert r.exit_code == 0, r.output
    assert [p.name for p in (tmp_path / "new").iterdir()] == [path.name]


def test_an_input_of_one_dimension_is_refused_naming_what_kgen_takes(tmp_path):
    """A 1-D input is refused, naming the inputs kgen takes: (batch, in_features), or (..., in_features)
    for a Linear over its last dimension (tests/test_rows_input.py)."""
    ref = tmp_path / "vector.py"
    ref.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(64, 32)\n\n"
        "    def forward(self, x):\n        return torch.relu(self.fc(x))\n\n\n"
        "def get_inputs():\n    return [torch.randn(64)]\n\n\n"
        "def get_init_inputs():\n    return []\n")
    out = tmp_path / "new.py"
    refused(run("generate", str(ref), "-o", str(out)), "the input is torch.float32 of shape (64,); kgen's GEMM takes "
            "one (batch, in_features) tensor of float32, bfloat16 or float16 (or (..., in_features)")
    assert not out.exists()


def test_gemv_on_a_module_the_rewrite_does_not_fit_is_a_usage_error(tmp_path):
    out = tmp_path / "g.py"
    refused(run("generate", "--backend", "gemv", "-o", str(out)),
            "the matrix-vector rewrite (backend gemv) does not apply to this module")
    assert not out.exists() and list(tmp_path.iterdir()) == []


@NO_GPU
@pytest.mark.parametrize("args, phrase", [
    ((str(REFS / "conv2d_relu.py"),), "Conv2d"),
    (("--tol", "-1"), "a tolerance must be a positive finite number"),
    (("--tol", "nan"), "a tolerance must be a positive finite number"),
    (("--tol", "1e-4", "--tol", "abc"), "expected a number like 1e-4"),
    (("--in", "0"), "must be a positive integer"),
    (("--batch", "1000000000"), "elements"),
    (("--set", "nosuch=3"), "nosuch"),
    (("--plot", "candidates.txt"), "a plot is written as .png, .svg, .pdf"),
    (("--dtype", "int8"), "'int8' is not one of"),
])
def test_search_checks_the_module_and_options_before_it_needs_a_gpu(tmp_path, monkeypatch, args, phrase):
    monkeypatch.chdir(tmp_path)
    r = run("search", *args)
    assert r.exit_code == 2 and phrase in r.output and "needs a CUDA GPU" not in r.output, r.output
    assert "Traceback" not in r.output
    assert list(tmp_path.iterdir()) == []


def test_validate_refuses_a_tolerance_that_is_not_positive(tmp_path):
    out = tmp_path / "m.py"
    assert run("generate", "-o", str(out), "--results-dir", str(tmp_path)).exit_code == 0
    refused(run("validate", str(out), "--tol", "0"), "a tolerance must be a positive finite number")


def test_validate_in_a_dtype_the_file_does_not_run_is_a_usage_error(tmp_path):
    """Only the Hopper wgmma files run bf16 / fp16 modules: asking another file to be checked in
    bf16 names what it runs and where 16-bit modules run, before any GPU is looked for."""
    out = tmp_path / "m.py"
    assert run("generate", "-o", str(out), "--backend", "kgen", "--results-dir", str(tmp_path)).exit_code == 0
    r = run("validate", str(out), "--dtype", "bf16")
    refused(r, "runs float32 modules, not bfloat16")
    assert "--backend wgmma" in r.output and "needs a CUDA GPU" not in r.output


def test_bench_of_a_reference_module_says_what_it_is(tmp_path):
    for cmd in ("bench", "validate"):
        r = run(cmd, str(REFS / "gemm_swish_scale.py"))
        refused(r, "is not a ModelNew file written by kgen")
        assert f"kgen generate {REFS / 'gemm_swish_scale.py'}" in r.output
        assert "inheritance bypass" not in r.output and "static rules" not in r.output


def test_a_symlink_is_written_through(tmp_path):
    target = tmp_path / "real.py"
    target.write_text("old")
    link = tmp_path / "link.py"
    link.symlink_to(target)
    r = run("generate", "-o", str(link), "--force")
    assert r.exit_code == 0, r.output
    assert link.is_symlink() and "ModelNew" in target.read_text()


def test_a_failed_write_is_a_message_and_leaves_nothing(tmp_path, monkeypatch):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    r = run("generate", "-o", str(blocker / "x.py"))   # (a file in the way: the user's request, exit 2)
    assert r.exit_code == 2 and "cannot write" in r.output and "is a file, not a folder" in r.output
    assert "Traceback" not in r.output

    def full_disk(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(generator.os, "replace", full_disk)
    monkeypatch.setattr(generator.os, "link", full_disk)
    r = run("generate", "-o", str(tmp_path / "y.py"))
    assert r.exit_code == 1 and "No space left on device" in r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]  # no .y.py.*.tmp left


def test_validate_and_bench_read_the_file_before_anything_else(tmp_path):
    """A malformed or foreign file is refused from its text, without executing it and before
    any GPU is looked for."""
    marker = tmp_path / "ran"
    bad = tmp_path / "bad.py"
    bad.write_text(f"import pathlib\npathlib.Path({str(marker)!r}).write_text('x')\n")
    broken = tmp_path / "broken.py"
    broken.write_text("def (:\n")
    for cmd in ("validate", "bench"):
        for f in (bad, broken, tmp_path / "missing.py"):
            r = run(cmd, str(f))
            assert r.exit_code in (1, 2) and "Traceback" not in r.output, r.output
            assert "needs a CUDA GPU" not in r.output
    assert not marker.exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message shown without a GPU")
def test_gpu_commands_say_when_there_is_no_gpu(tmp_path):
    r = run("search", "--in", "64", "--out", "64")
    assert r.exit_code == 2 and "needs a CUDA GPU" in r.output
    r = run("search", "--in", "64", "--out", "64", "--dtype", "bf16")
    assert r.exit_code == 2 and "needs a CUDA GPU" in r.output
    out = tmp_path / "m.py"
    run("generate", "-o", str(out))
    for cmd in ("validate", "bench"):
        r = run(cmd, str(out))
        assert r.exit_code == 2 and "needs a CUDA GPU" in r.output
    r = run("bench", str(out), "--training")
    assert r.exit_code == 2 and "needs a CUDA GPU" in r.output


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks what is said before the GPU is looked for")
def test_validate_and_bench_take_the_dtype_the_file_was_measured_in(tmp_path):
    """A file whose header records a bf16 measurement is checked and timed in bf16 without
    --dtype, and says so; a record of fp32 (no dtype named) leaves the reference's dtype."""
    out = tmp_path / "m.py"
    assert run("generate", "--backend", "wgmma", "--math", "tf32x3", "-o", str(out)).exit_code == 0
    text = out.read_text()
    for record, noted in (("{'dtype': 'bfloat16', 'median_ms': 0.2}", True), ("{'median_ms': 0.2}", False)):
        out.write_text(text.replace("KGEN_MEASURED = None", f"KGEN_MEASURED = {record}", 1))
        for cmd in ("validate", "bench"):
            r = run(cmd, str(out))
            assert r.exit_code == 2 and "needs a CUDA GPU" in r.output, r.output
            assert ("measured with the module in bf16" in r.output) == noted, (record, cmd, r.output)


def test_validate_judges_a_file_of_rounded_products_at_the_relaxed_tier_by_default(tmp_path, monkeypatch):
    """Without --tol, a file whose GEMM rounds an fp32 module's operands (tf32, bf16, fp16) is
    judged at 1e-2 and says so; an fp32-accurate one at KernelBench's fp32 1e-4; --tol wins."""
    import kgen.check.validate as validate_module
    from kgen.check.loading import EmittedFile

    seen = []
    monkeypatch.setattr(cli, "_require_cuda", lambda what: None)
    monkeypatch.setattr(EmittedFile, "build", lambda self, dtype=None: None)
    monkeypatch.setattr(validate_module, "validate", lambda f, tol, **kw: seen.append(tol) or [])
    for math, extra, tol in (("fp16", [], 1e-2), ("tf32", [], 1e-2), ("tf32x3", [], 1e-4), ("fp16", ["--tol", "0.05"], 0.05)):
        out = tmp_path / f"{math}.py"
        assert run("generate", "--in", "512", "--out", "256", "--batch", "64", "--backend", "wgmma", "--math", math,
                   "-o", str(out), "--force").exit_code == 0
        r = run("validate", str(out), *extra)
        assert r.exit_code == 0, r.output
        assert seen[-1] == tol and f"at tol {tol:g}" in r.output, (math, r.output)
        assert ("the relaxed tier's tolerance" in r.output) == (math != "tf32x3" and not extra), r.output
    # A search's winner is judged in the tier its header records it was chosen in (measured in the
    # dtype validated): a bf16 file of a 5e-2 tier at 5e-2, a TF32 one of a 1e-3 tier at 1e-3.
    for math, record, tol in (("bf16", "{'tol': 0.05, 'median_ms': 0.3}", 0.05), ("tf32", "{'tol': 0.001, 'median_ms': 0.3}", 1e-3),
                              ("tf32", "{'tol': 0.05, 'dtype': 'bfloat16', 'median_ms': 0.3}", 1e-2)):
        out = tmp_path / f"{math}_measured.py"
        assert run("generate", "--in", "512", "--out", "256", "--batch", "64", "--backend", "wgmma", "--math", math,
                   "-o", str(out), "--force").exit_code == 0
        out.write_text(out.read_text().replace("KGEN_MEASURED = None", f"KGEN_MEASURED = {record}", 1))
        r = run("validate", str(out), "--dtype", "fp32")
        assert r.exit_code == 0 and seen[-1] == tol, (record, r.output)
        assert ("its header); judging it there" in r.output) == ("bfloat16" not in record), r.output


def test_bench_refuses_a_dtype_the_file_does_not_run(tmp_path):
    """An fp32-only file benched (or its training step) in bf16: the reason, before any GPU
    is looked for, as validate gives it."""
    out = tmp_path / "m.py"
    assert run("generate", "--backend", "kgen", "-o", str(out)).exit_code == 0
    for extra in ([], ["--training"]):
        r = run("bench", str(out), "--dtype", "bf16", *extra)
        assert r.exit_code == 2 and "runs float32 modules, not bfloat16" in r.output, r.output
        assert "Traceback" not in r.output


def test_commands_that_load_torch_print_no_numpy_warning():
    proc = subprocess.run([sys.executable, "-m", "kgen", "generate", "--help"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and "NumPy" not in proc.stderr + proc.stdout


def header_of(path) -> str:
    return ast.get_docstring(ast.parse(path.read_text()))


def class_docstring(path, name="ModelNew") -> str:
    (cls,) = [n for n in ast.parse(path.read_text()).body if isinstance(n, ast.ClassDef) and n.name == name]
    return ast.get_docstring(cls)


@NO_GPU
def test_a_file_made_from_a_search_winner_says_what_that_search_measured(tmp_path):
    winner = Spec.of("gemm_scale_bn", 1024, 8192, 8192, math="tf32x3", backend="wgmma", fusion=2,
                     tile=Tile(128, 64, 32, 16, 64, stages=6))
    measured = {"device": "NVIDIA H100 80GB HBM3", "date": "2026-11-22", "batch": 1024, "tol": 1e-4,
                "median_ms": 1.117, "p20_ms": 1.110, "p80_ms": 1.130, "eager_ms": 2.785, "ratio": 0.401,
                "max_abs_err": 6.3e-6, "max_rel_err": 2.0e-5}
    record = {"winners": {"0.0001": {"name": winner.name(), "spec": winner.to_dict(), "measured": measured}},
              "candidates": [{"name": winner.name(), "key": "0123456789abcdef"}]}
    (tmp_path / "search_x.json").write_text(json.dumps(record))
    out = tmp_path / "m.py"
    r = run("generate", "-o", str(out), "--results-dir", str(tmp_path))
    assert r.exit_code == 0, r.output
    header = header_of(out)
    assert "nothing yet" not in header
    assert "measured:  NVIDIA H100 80GB HBM3, 2026-11-22, batch 1024, tol 0.0001" in header
    assert "1.117 ms median (p20 1.110, p80 1.130); eager fp32 reference 2.785 ms" in header
    assert f"the winner of the search recorded in {tmp_path / 'search_x.json'}" in header
    # the record's build of the variant is not this file's: the header says so
    assert f"(key 0123456789abcdef; this file's is {winner.key()})" in header
    assert spec_of(out) == winner.to_dict()


def test_the_variant_line_describes_what_the_variant_does(tmp_path):
    plain, with_bn = tmp_path / "relu.py", tmp_path / "bn.py"
    for ref, out in ((str(REFS / "matmul_sub_mul_relu.py"), plain), ("--problem=gemm_scale_bn", with_bn)):
        r = run("generate", ref, "--backend", "kgen", "--fusion", "1", "-o", str(out))
        assert r.exit_code == 0, r.output
    (variant,) = [line for line in header_of(plain).splitlines() if line.startswith("variant:")]
    assert "separate kernel" not in variant and "no BatchNorm" in variant
    (variant,) = [line for line in header_of(with_bn).splitlines() if line.startswith("variant:")]
    assert "column statistics in a separate kernel" in variant


def test_the_reference_docstring_is_a_sentence_of_its_own(tmp_path):
    out = tmp_path / "m.py"
    r = run("generate", str(REFS / "matmul_sub_mul_relu.py"), "--backend", "kgen", "-o", str(out))
    assert r.exit_code == 0, r.output
    first, blank, rest = class_docstring(out).split("\n", 2)
    assert first == "Linear -> -2.0 -> x1.5 -> ReLU (KernelBench level 2, problem 9)." and blank == ""
    assert rest.startswith("Drop-in replacement for the reference Model: the same class")
    # a docstring line without a full stop gets one
    assert generator.sentence("Linear -> ReLU") == "Linear -> ReLU."


@NO_GPU
def test_a_copy_of_the_repository_run_from_elsewhere_finds_its_shipped_winners(tmp_path, monkeypatch):
    """A clone's results/ is found from the reference's place, whatever the working directory
    (kgen's own checkout, whose records would also match, is taken out of the search)."""
    from kgen.tune import choose

    repo = Path(__file__).parent.parent
    clone = tmp_path / "clone"
    shutil.copytree(repo / "results", clone / "results")
    ref = clone / "tests" / "refs" / "gemm_groupnorm_hardtanh.py"
    ref.parent.mkdir(parents=True)
    shutil.copy(REFS / ref.name, ref)
    monkeypatch.setattr(choose, "SHIPPED_RESULTS_DIR", tmp_path / "no_checkout" / "results")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    r = run("generate", str(ref), "-o", "m.py")
    assert r.exit_code == 0, r.output
    record = clone / "results" / "search_gemm_groupnorm_hardtanh_b1024_i8192_o8192_tol0.0001.json"
    assert f"winner of an earlier search ({record})" in r.output
    assert f"recorded in {record}" in header_of(elsewhere / "m.py")
    assert sorted(p.name for p in elsewhere.iterdir()) == ["m.py"]   # no results/ or generated/ made here


@NO_GPU
def test_kgens_own_records_are_found_from_any_working_directory(tmp_path):
    """The shipped problem's winner, from a directory with no results/ of its own (a subprocess:
    the installed command as a user runs it)."""
    repo = Path(__file__).parent.parent
    env = dict(os.environ, PYTHONPATH=str(repo))
    proc = subprocess.run([sys.executable, "-m", "kgen.cli", "generate", "--in", "8192", "--out", "8192",
                           "-o", "m.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"winner of an earlier search ({repo / 'results'}" in proc.stdout
    assert "Traceback" not in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.py"]


def write_record(folder, problem, shape, tols_ms, device="NVIDIA H100 80GB HBM3", date="2026-11-22"):
    """A search record of `problem` at `shape` with one winner per (tol, ms) pair."""
    batch, in_features, out_features = shape
    winners = {f"{tol:g}": {"name": f"{problem}_variant_{tol:g}", "path": f"generated/{problem}_tol{tol:g}.py",
                            "measured": {"median_ms": ms, "ratio": ms / 2.5, "device": device, "date": date}}
               for tol, ms in tols_ms}
    record = {"problem": problem, "batch": batch, "in_features": in_features, "out_features": out_features,
              "constants": [], "arch": "sm_90a", "device": device, "winners": winners, "candidates": []}
    path = folder / f"search_{problem}_b{batch}.json"
    path.write_text(json.dumps(record))
    return path


def test_winners_lists_the_records_winners_as_a_table_and_as_json(tmp_path):
    write_record(tmp_path, "gemm_scale_bn", (1024, 8192, 8192), [(1e-4, 1.117), (1e-2, 0.376)])
    write_record(tmp_path, "abc_module", (128, 64, 32), [(1e-4, 0.5)])
    write_record(tmp_path, "no_winner", (8, 8, 8), [])
    (tmp_path / "search_broken.json").write_text("{")
    r = run("winners", "--results-dir", str(tmp_path))
    assert r.exit_code == 0, r.output
    notes = [line for line in r.output.splitlines() if line.startswith("note: ")]   # (stderr)
    assert notes == [f"note: skipped {tmp_path / 'search_broken.json'}: not a search record (not JSON: "
                     "Expecting property name enclosed in double quotes: line 1 column 2 (char 1))"]
    header, *rows = [line for line in r.output.strip().splitlines() if line not in notes]
    assert header.split() == ["problem", "batch", "x", "in", "->", "out", "dtype", "tol", "ms", "x", "eager",
                              "device", "date"]
    assert [row.split()[0] for row in rows] == ["abc_module", "gemm_scale_bn", "gemm_scale_bn"]
    assert rows[1].split()[1:10] == ["1024", "x", "8192", "->", "8192", "fp32", "0.0001", "1.117", "0.447"]
    assert rows[1].endswith("NVIDIA H100 80GB HBM3  2026-11-22")
    assert run("list", "--results-dir", str(tmp_path)).output == r.output   # `list` is the same command
    r = run("winners", "--json", "--results-dir", str(tmp_path))
    listed = json.loads("\n".join(line for line in r.output.splitlines() if line not in notes))
    assert [(w["problem"], w["tol"], w["median_ms"]) for w in listed] == [
        ("abc_module", 1e-4, 0.5), ("gemm_scale_bn", 1e-4, 1.117), ("gemm_scale_bn", 1e-2, 0.376)]
    assert listed[0]["record"] == str(tmp_path / "search_abc_module_b128.json")


def test_winners_without_records_says_so(tmp_path):
    r = run("winners", "--results-dir", str(tmp_path))
    assert r.exit_code == 0 and "no search records with a winner" in r.output
    (tmp_path / "a_file").write_text("")
    refused(run("winners", "--results-dir", str(tmp_path / "a_file")), "is a file")


def test_searchs_dtype_is_the_references_unless_given(tmp_path):
    """kgen search's --dtype defaults to the dtype of the reference's get_inputs()."""
    ref = tmp_path / "half_input.py"
    ref.write_text(module_source("x = torch.relu(x)", {}, 64, dtype="bfloat16"))
    from kgen.tune.choose import module_dtype

    assert module_dtype(str(ref)) == "bf16"
    assert module_dtype("gemm_scale_bn") == "fp32"
    # validate's too: a file of it without a 16-bit build is refused for the module's dtype, bf16,
    # before a GPU is needed; with --dtype fp32 it goes on (to say it needs a GPU, here)
    out = tmp_path / "portable.py"
    r = run("generate", str(ref), "--backend", "kgen", "--math", "tf32x3", "-o", str(out))
    assert r.exit_code == 0 and "note: the module is bf16" in r.output and "runs fp32 modules only" in r.output
    r = run("generate", str(ref), "-o", str(tmp_path / "hopper.py"))
    assert r.exit_code == 0 and "note:" not in r.output, r.output
    r = run("validate", str(out))
    assert r.exit_code == 2 and "runs float32 modules, not bfloat16" in r.output, r.output
    if not torch.cuda.is_available():
        r = run("validate", str(out), "--dtype", "fp32")
        assert r.exit_code == 2 and "needs a CUDA GPU" in r.output, r.output


@NO_GPU
@pytest.mark.parametrize("extra, phrase", [
    (("--batch", "64"), "--batch take one reference file"),
    (("--set", "x=3"), "--set take one reference file"),
    (("--plot", "p.png"), "--plot take one reference file"),
])
def test_several_files_take_no_one_file_options(tmp_path, monkeypatch, extra, phrase):
    monkeypatch.chdir(tmp_path)
    r = run("search", str(REFS / "gemm_mul_leakyrelu.py"), str(REFS / "gemm_swish_scale.py"), *extra)
    assert r.exit_code == 2 and phrase in r.output and "needs a CUDA GPU" not in r.output, r.output


@NO_GPU
def test_several_files_are_all_checked_before_a_gpu_is_needed(tmp_path, monkeypatch):
    """One file kgen cannot take among several: refused with its reason, before any GPU is
    looked for (nothing searched, nothing written); all good: on to the GPU check."""
    monkeypatch.chdir(tmp_path)
    good = [str(REFS / "gemm_mul_leakyrelu.py"), str(REFS / "gemm_swish_scale.py")]
    r = run("search", *good, str(REFS / "conv2d_relu.py"))
    assert r.exit_code == 2 and "Conv2d" in r.output and "needs a CUDA GPU" not in r.output, r.output
    r = run("search", *good)
    assert r.exit_code == 2 and "needs a CUDA GPU" in r.output, r.output
    assert list(tmp_path.iterdir()) == []


def test_several_files_are_searched_in_turn_with_a_table_at_the_end(tmp_path, monkeypatch):
    """kgen search A.py B.py (run_search faked: no GPU here): each file searched at its own shape
    and dtype, in the order given, one plot beside each record; the table lists each file's
    winner (or none) and wall time; the exit code is 1 where a file got no winner."""
    from kgen.tune import search as search_module

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli, "_require_cuda", lambda what: None)
    monkeypatch.setattr(cli, "search_gpus", lambda count: [0])
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    monkeypatch.setattr(cli, "_draw", lambda record, path, *early: calls.append(("draw", path.name)))
    calls = []

    def fake_run_search(problem, batch, in_features, out_features, tols, **kw):
        calls.append(("search", Path(problem).name, batch, in_features, out_features, tuple(tols), kw["dtype"]))
        won = "swish" not in problem
        measured = {"median_ms": 1.25, "ratio": 0.45}
        return {"record_path": str(tmp_path / f"search_{Path(problem).stem}.json"), "tols": tols,
                "winners": {f"{tols[0]:g}": {"measured": measured}} if won else {}}

    monkeypatch.setattr(search_module, "run_search", fake_run_search)
    files = [REFS / "gemm_mul_leakyrelu.py", REFS / "gemm_swish_scale.py"]
    r = run("search", *map(str, files), "--tol", "1e-4", "--summary-json", str(tmp_path / "summary.json"))
    assert r.exit_code == 1, r.output
    # what a search of several files spread over GPUs reads of each (tune.several)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [(Path(s["ref"]).name, Path(s["record_path"]).name) for s in summary] == [
        (f.name, f"search_{f.stem}.json") for f in files] and all(s["wall_s"] >= 0 for s in summary)
    searched = [c for c in calls if c[0] == "search"]
    assert [c[1] for c in searched] == [f.name for f in files]
    from kgen.frontend.problems import default_shape
    for c, f in zip(searched, files):
        assert c[2:5] == tuple(default_shape(str(f))) and c[5] == (1e-4,) and c[6] == "fp32"
    assert [c[1] for c in calls if c[0] == "draw"] == ["search_gemm_mul_leakyrelu.png", "search_gemm_swish_scale.png"]
    assert "=== [1/2]" in r.output and "=== [2/2]" in r.output
    table = r.output[r.output.index("file "):]
    assert "gemm_mul_leakyrelu.py" in table and "1.250" in table and "0.450" in table
    assert "gemm_swish_scale.py" in table and "none" in table
    assert "2 files, 1 with a winner" in table


def test_a_module_whose_constructor_raises_is_a_clear_refusal(tmp_path):
    """Model(*get_init_inputs()) raising (GroupNorm of groups that do not divide the features)
    is the user's error, said in one line: exit 2, no traceback."""
    ref = tmp_path / "bad_groups.py"
    ref.write_text("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
                   "    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(16, 24)\n"
                   "        self.gn = nn.GroupNorm(5, 24)\n\n    def forward(self, x):\n"
                   "        return self.gn(self.fc(x))\n\n\ndef get_inputs():\n    return [torch.randn(8, 16)]\n\n\n"
                   "def get_init_inputs():\n    return []\n")
    out = tmp_path / "new.py"
    r = run("generate", str(ref), "-o", str(out))
    assert r.exit_code == 2, r.output
    assert "Model(*get_init_inputs()) raised ValueError: num_channels (24) must be divisible by num_groups (5)" in r.output
    assert "Traceback" not in r.output
    assert not out.exists()


def test_a_refusal_is_short_and_kgen_ops_lists_what_kgen_takes(tmp_path):
    """A refusal names the op and its line and points at `kgen ops` (it once appended the whole
    list, some 3000 characters); `kgen ops` lists every point-wise op of the IR's table by its
    torch name, one topic per item."""
    from kgen.ir import ops

    ref = tmp_path / "cumsum.py"
    ref.write_text(module_source("x = torch.cumsum(x, dim=1)", {}, out_features=24))
    r = run("generate", str(ref), "-o", str(tmp_path / "new.py"))
    assert r.exit_code == 2, r.output
    assert "line 16: `x = torch.cumsum(x, dim=1)`" in r.output and "`kgen ops`" in r.output
    assert len(r.output) < 400 and "Traceback" not in r.output
    r = run("ops")
    assert r.exit_code == 0, r.output
    torch_names = [n for n in ops.POINTWISE if hasattr(torch, n) or hasattr(torch.nn.functional, n)]
    assert len(torch_names) > 40
    listed = r.output.replace("\n  ", " ")
    for name in torch_names:
        assert f" {name}," in listed or f" {name} (" in listed, name
    for topic in ("GEMMs:", "row reductions over dim 1:", "normalizations:", "Dropout:"):
        assert f"\n- {topic}" in r.output


@pytest.mark.parametrize("guess_holds", [True, False])
def test_the_plot_is_drawn_while_the_winner_is_validated(tmp_path, monkeypatch, guess_holds):
    """kgen search draws its plot as the winner's full validation starts (run_search's
    on_contender, run_search faked here), from the record as it will be if that candidate wins:
    where it does, the plot is not drawn again and the search says so; where another wins, it is
    drawn again from the record returned."""
    from kgen.tune import plot as plot_module
    from kgen.tune import search as search_module

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli, "_require_cuda", lambda what: None)
    monkeypatch.setattr(cli, "search_gpus", lambda count: [0])
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    drawn = []

    class Figure:   # (no matplotlib needed: plot_record's PNG with the digest it names)
        def savefig(self, path, dpi, metadata):
            drawn.append(metadata[plot_module.DIGEST_KEY])
            import zlib

            def chunk(kind, body):
                return len(body).to_bytes(4, "big") + kind + body + zlib.crc32(kind + body).to_bytes(4, "big")
            text = b"".join(chunk(b"tEXt", k.encode() + b"\0" + v.encode()) for k, v in metadata.items())
            path.write_bytes(b"\x89PNG\r\n\x1a\n" + text + chunk(b"IEND", b""))

    monkeypatch.setattr(plot_module, "figure", lambda record: Figure())
    point = {"status": "passed", "passing_tols": [1e-4], "spec": {"math": "fp16x3"},
             "measured": {"median_ms": 1.0, "max_abs_err": 1e-6, "eager_ms": 2.0}}

    def fake_run_search(problem, batch, in_features, out_features, tols, on_contender=None, **kw):
        record = {"record_path": str(tmp_path / "search_m.json"), "search": "m", "tols": tols,
                  "candidates": [dict(point, name="a"), dict(point, name="b")], "winners": {}}
        on_contender(dict(record, winners={"0.0001": {"name": "a"}}))
        return dict(record, winners={"0.0001": {"name": "a" if guess_holds else "b", "measured": point["measured"]}})

    monkeypatch.setattr(search_module, "run_search", fake_run_search)
    r = run("search", str(REFS / "gemm_mul_leakyrelu.py"), "--tol", "1e-4")
    assert r.exit_code == 0, r.output
    assert len(drawn) == (1 if guess_holds else 2)
    assert plot_module.png_text(tmp_path / "search_m.png")[plot_module.DIGEST_KEY] == drawn[-1]
    assert ("(drawn while the winner was validated)" in r.output) == guess_holds, r.output


def test_generate_notes_parameters_in_another_dtype_than_the_input(tmp_path):
    """A 16-bit module that keeps a BatchNorm in fp32 (mixed precision's habit) generates, and
    generate says at once what the file would only say at run time: outside torch.autocast its
    kernels read every parameter and buffer in the input's dtype and refuse the module as built.
    A module of one dtype gets no such note, nor one whose other-dtype tensor the forward never reads."""
    ref = tmp_path / "mixed.py"
    ref.write_text(module_source("x = torch.relu(self.bn(x))", {"bn": "nn.BatchNorm1d(out_features).float()"},
                                 64, dtype="bfloat16"))
    r = run("generate", str(ref), "-o", str(tmp_path / "mixed_out.py"))
    assert r.exit_code == 0, r.output
    assert ("note: the module's input is bfloat16 and its bn.weight is float32, bn.bias is float32, "
            "bn.running_mean is float32, 1 more") in r.output and "model.to(torch.bfloat16)" in r.output, r.output
    same = tmp_path / "same.py"
    same.write_text(module_source("x = torch.relu(self.bn(x))", {"bn": "nn.BatchNorm1d(out_features, dtype=torch.bfloat16)"}, 64,
                                  dtype="bfloat16"))
    r = run("generate", str(same), "-o", str(tmp_path / "same_out.py"))
    assert r.exit_code == 0 and "note: the module's input" not in r.output, r.output
    unread = tmp_path / "unread.py"   # (a float64 buffer the forward never reads: the file never refuses it)
    unread.write_text(module_source("x = torch.relu(x)", {"spare": "nn.Parameter(torch.zeros(3, dtype=torch.float64))"},
                                    64, dtype="bfloat16"))
    r = run("generate", str(unread), "-o", str(tmp_path / "unread_out.py"))
    assert r.exit_code == 0 and "note: the module's input" not in r.output, r.output
