"""Rendering: every spec of the search space, for both problems, gives a file that parses,
obeys the static rules, describes itself, and imports (exec'd, as KernelBench loads it)
without compiling anything."""

import ast
import types
from pathlib import Path

import pytest
import torch

from kgen import generator
from kgen.problems import PROBLEMS
from kgen.search import enumerate_specs
from kgen.static_checks import violations

SHAPES = [(1024, 8192, 8192), (16384, 4096, 4096), (1000, 1000, 1000), (7, 3, 5)]
ALL_SPECS = [s for p in PROBLEMS for shape in SHAPES for s in enumerate_specs(p, *shape)]


def exec_file(text: str, name="emitted"):
    module = types.ModuleType(name)
    exec(compile(text, f"<{name}>", "exec"), module.__dict__)
    return module


@pytest.mark.parametrize("spec", ALL_SPECS, ids=lambda s: s.name())
def test_every_spec_renders_to_a_clean_file(spec):
    text = generator.render(spec)
    ast.parse(text)
    assert violations(text) == []
    assert spec.key() in text and generator.generate_command(spec) in text
    module = exec_file(text)
    assert module.KGEN_SPEC == spec.to_dict()
    assert module._EXTENSIONS == {}  # nothing was built at import
    # The CUDA side carries exactly this variant's configuration.
    assert generator.gemm_type(spec) in module._CUDA_SOURCE
    assert not any(f"#include <{h}" in module._CUDA_SOURCE for h in ("torch", "ATen", "c10"))


def test_cuda_source_has_no_torch_and_binding_has_no_kernels():
    spec = ALL_SPECS[0]
    cuda, cpp = generator.render_cuda_source(spec), generator.render_cpp_source(spec)
    assert "#include <torch" not in cuda and "__global__" not in cpp


def test_header_reports_measurements():
    spec = ALL_SPECS[0]
    measured = {"device": "NVIDIA H100 80GB HBM3", "date": "2026-11-21", "batch": 1024, "tol": 1e-4,
                "median_ms": 1.5, "p20_ms": 1.49, "p80_ms": 1.52, "eager_ms": 2.77, "ratio": 0.5416,
                "max_abs_err": 2e-6, "max_rel_err": 1e-6}
    text = generator.render(spec, measured)
    header = ast.get_docstring(ast.parse(text))
    assert "NVIDIA H100 80GB HBM3" in header and "0.542x" in header and "2.00e-06" in header
    assert exec_file(text).KGEN_MEASURED == measured


@pytest.mark.parametrize("problem", sorted(PROBLEMS))
def test_model_new_matches_model_construction_on_cpu(problem, tmp_path):
    """Same constructor, same parameter/buffer names, same seeded values, state_dict both ways."""
    spec = enumerate_specs(problem, 16, 24, 40)[0]
    module = exec_file(generator.render(spec))
    Model = PROBLEMS[problem].reference_model_class()
    args = PROBLEMS[problem].init_args(24, 40)
    torch.manual_seed(3)
    ref = Model(*args)
    torch.manual_seed(3)
    new = module.ModelNew(*args)
    a, b = ref.state_dict(), new.state_dict()
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert {n for n, _ in new.named_children()} == {n for n, _ in ref.named_children()}
    new.load_state_dict(ref.state_dict())
    ref.load_state_dict(new.state_dict())
    assert module.get_init_inputs() == list(args)
    assert module.get_inputs()[0].shape == (16, 24)


@pytest.mark.parametrize("x, error, phrase", [
    (torch.rand(4, 24), ValueError, "CUDA"),
    (torch.rand(4, 25), ValueError, "(batch, 24)"),
    (torch.rand(4, 24, dtype=torch.float64), TypeError, "float32"),
    (torch.rand(24), ValueError, "(batch, 24)"),
    ([[1.0] * 24], TypeError, "torch.Tensor"),
])
def test_bad_input_gets_a_clear_error_without_a_gpu(x, error, phrase):
    spec = enumerate_specs("gemm_scale_bn", 16, 24, 40)[0]
    module = exec_file(generator.render(spec))
    with pytest.raises(error, match=phrase.replace("(", r"\(").replace(")", r"\)")):
        module.ModelNew(*PROBLEMS["gemm_scale_bn"].init_args(24, 40))(x)
    assert module._EXTENSIONS == {}


def test_write_is_atomic_and_lands_at_the_default_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = ALL_SPECS[0]
    path = generator.write(spec)
    assert path == generator.default_path(spec) and path.read_text() == generator.render(spec)
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary left behind


GENERATED = sorted((Path(__file__).resolve().parent.parent / "generated").glob("*.py"))


@pytest.mark.parametrize("path", GENERATED, ids=lambda p: p.name)
def test_committed_winners_are_clean_and_self_describing(path):
    """The files kgen ships in generated/ obey the static rules, import without building,
    and carry the measurements of the search that chose them."""
    text = path.read_text()
    assert violations(text) == []
    module = exec_file(text, path.stem)
    assert module._EXTENSIONS == {}
    m = module.KGEN_MEASURED
    assert m is not None and m["median_ms"] > 0 and m["eager_ms"] > 0
    assert f"{m['ratio']:.3f}x" in ast.get_docstring(ast.parse(text))


@pytest.mark.parametrize("capability, refused", [((8, 0), True), ((10, 0), True), ((9, 0), False)])
def test_wgmma_file_refuses_a_non_hopper_gpu_before_compiling(capability, refused, monkeypatch):
    """wgmma exists on sm_90 only: elsewhere build() says so instead of failing inside nvcc."""
    spec = next(s for s in enumerate_specs("gemm_scale_bn", 16, 24, 40) if s.family == "wgmma")
    module = exec_file(generator.render(spec))
    compiled = []
    monkeypatch.setattr(module.torch.cuda, "get_device_capability", lambda device=None: capability)
    monkeypatch.setattr(module, "load_inline", lambda **kw: compiled.append(kw) or object())
    if refused:
        with pytest.raises(RuntimeError, match=r"wgmma.*sm_90a.*--backend kgen"):
            module.build()
        assert compiled == []
    else:
        module.build()
        assert [kw["extra_cuda_cflags"][-1] for kw in compiled] == ["-gencode=arch=compute_90a,code=sm_90a"]
