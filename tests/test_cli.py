import ast

import pytest

import torch
from click.testing import CliRunner

from kgen.cli import main


def run(*args):
    return CliRunner().invoke(main, list(args))


def test_generate_default_problem_and_shape(tmp_path):
    out = tmp_path / "m.py"
    r = run("generate", "--in", "8192", "--out", "8192", "-o", str(out))
    assert r.exit_code == 0, r.output
    text = out.read_text()
    ast.parse(text)
    assert "'batch': 1024" in text and "'math': 'fp32_simt'" in text


def test_generate_writes_under_generated_by_default(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = run("generate", "--problem", "gemm_bn_scale_softmax", "--in", "1000", "--out", "1000",
            "--batch", "7", "--math", "tf32x3", "--tile", "128x128x32", "--warp", "64x32", "--stages", "4")
    assert r.exit_code == 0, r.output
    (path,) = (tmp_path / "generated").iterdir()
    assert path.name.startswith("gemm_bn_scale_softmax_b7_i1000_o1000_tf32x3_f2_t128x128x32_w64x32_s4")


def test_generate_cublas_variant(tmp_path):
    r = run("generate", "--backend", "cublas", "--math", "tf32", "-o", str(tmp_path / "c.py"))
    assert r.exit_code == 0, r.output
    assert "CUBLAS_COMPUTE_32F_FAST_TF32" in (tmp_path / "c.py").read_text()


def test_generate_rejects_bad_requests_clearly(tmp_path):
    r = run("generate", "--tile", "128x128", "-o", str(tmp_path / "x.py"))
    assert r.exit_code != 0 and "expected --tile like 128x128x128" in r.output
    r = run("generate", "--tile", "128x128x8", "--warp", "48x64", "-o", str(tmp_path / "x.py"))
    assert r.exit_code != 0 and "multiple of WM" in r.output
    r = run("generate", "--backend", "cublas", "--tile", "128x128x8", "-o", str(tmp_path / "x.py"))
    assert r.exit_code != 0 and "cuBLAS chooses its own tiles" in r.output
    r = run("generate", "--in", "0")
    assert r.exit_code != 0
    assert not (tmp_path / "x.py").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message shown without a GPU")
def test_gpu_commands_say_when_there_is_no_gpu(tmp_path):
    r = run("search", "--in", "64", "--out", "64")
    assert r.exit_code == 2 and "needs a CUDA GPU" in r.output
    out = tmp_path / "m.py"
    run("generate", "-o", str(out))
    for cmd in ("validate", "bench"):
        r = run(cmd, str(out))
        assert r.exit_code == 2 and "needs a CUDA GPU" in r.output
