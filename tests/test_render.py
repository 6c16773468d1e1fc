"""Rendering: every spec of the search space, for both problems, gives a file that parses,
obeys the static rules, describes itself, and imports (exec'd, as KernelBench loads it)
without compiling anything."""

import ast
import ctypes
import json
import re
import types
from pathlib import Path

import pytest
import torch

from kgen.codegen import generator
from kgen.frontend import problems
from kgen.frontend.problems import PROBLEMS
from kgen.tune.search import enumerate_specs
from kgen.tune.spec import Spec, Tile
from kgen.check.static_checks import check_emitted

SHAPES = [(1024, 8192, 8192), (16384, 4096, 4096), (1000, 1000, 1000), (7, 3, 5)]
# Every variant the search space holds, for both problems, at several shapes, for Hopper and for
# a 99 KB target.
ALL_SPECS = ([s for p in PROBLEMS for shape in SHAPES for s in enumerate_specs(p, *shape)]
             + [s for p in PROBLEMS for s in enumerate_specs(p, 1024, 8192, 8192, arch="sm_86")])


def exec_file(text: str, name="emitted"):
    module = types.ModuleType(name)
    exec(compile(text, f"<{name}>", "exec"), module.__dict__)
    return module


@pytest.mark.parametrize("spec", ALL_SPECS, ids=lambda s: s.name())
def test_every_spec_renders_to_a_clean_file(spec):
    text = generator.render(spec)
    assert check_emitted(text) == []   # (a file that does not parse is one of its violations)
    assert spec.key() in text and generator.generate_command(spec) in text
    module = exec_file(text)
    assert module.KGEN_SPEC == spec.to_dict()
    assert module._KGEN_LIBRARIES == {}  # nothing was built at import
    # The CUDA side carries exactly this variant's configuration.
    assert generator.gemm_type(spec) in module._KGEN_CUDA_SOURCE
    assert not any(f"#include <{h}" in module._KGEN_CUDA_SOURCE for h in ("torch", "ATen", "c10"))


def entry_points_agree(module) -> int:
    """Compare the C prototype of each part's kgen_forward_<part> with the ctypes signature the
    file calls it with; returns the number of parts."""
    def agree(prototype: str, args):
        params = [p.strip().rsplit(" ", 1) for p in prototype.split(",")]
        assert [name for _, name in params] == [name for name, _ in args]
        for (ctype, name), (_, pytype) in zip(params, args):
            expected = ctypes.c_void_p if ctype.endswith("*") else {"int": ctypes.c_int, "long long": ctypes.c_longlong, "float": ctypes.c_float}[ctype]
            assert pytype is expected, name

    protos = dict(re.findall(r'KGEN_EXPORT const char\* kgen_forward_(\d+)\(([^)]*)\)', module._KGEN_CUDA_SOURCE))
    assert sorted(protos) == [str(k) for k in range(len(module._KGEN_FORWARD_ARGS))]
    backward = dict(re.findall(r'KGEN_EXPORT const char\* kgen_backward_(\d+)\(([^)]*)\)', module._KGEN_CUDA_SOURCE))
    assert sorted(backward) == [str(k) for k, args in enumerate(module._KGEN_BACKWARD_ARGS) if args is not None]
    for part, args in enumerate(module._KGEN_FORWARD_ARGS):
        agree(protos[str(part)], args)
        assert f'KGEN_EXPORT long long kgen_workspace_floats_{part}(' in module._KGEN_CUDA_SOURCE
        assert f'KGEN_EXPORT int kgen_output_is_operand_typed_{part}()' in module._KGEN_CUDA_SOURCE
        if module._KGEN_BACKWARD_ARGS[part] is not None:
            agree(backward[str(part)], module._KGEN_BACKWARD_ARGS[part])
    return len(module._KGEN_FORWARD_ARGS)


def test_python_and_cuda_agree_on_the_entry_point():
    """The C prototype of kgen_forward_0 and the ctypes signature the file calls it with come
    from one list; here they are read back from the rendered file and compared."""
    assert entry_points_agree(exec_file(generator.render(ALL_SPECS[0]))) == 1


def test_header_reports_measurements():
    spec = ALL_SPECS[0]
    measured = {"device": "NVIDIA H100 80GB HBM3", "date": "2026-11-21", "batch": 1024, "tol": 1e-4,
                "median_ms": 1.5, "p20_ms": 1.49, "p80_ms": 1.52, "eager_ms": 2.77, "ratio": 0.5416,
                "max_abs_err": 2e-6, "max_rel_err": 1e-6}
    text = generator.render(spec, measured)
    header = ast.get_docstring(ast.parse(text))
    assert "NVIDIA H100 80GB HBM3" in header and "0.542x" in header and "2.00e-06" in header
    assert "eager fp32 reference 2.770 ms" in header
    assert exec_file(text).KGEN_MEASURED == measured
    # a search of the module in bf16 measured it against eager in bf16, and the header says so
    header = ast.get_docstring(ast.parse(generator.render(spec, {**measured, "dtype": "bfloat16"})))
    assert "the module in bf16" in header and "eager bf16 reference 2.770 ms" in header and "fp32" not in \
        header.split("max abs error")[0].split("measured:")[1]


@pytest.mark.parametrize("problem", sorted(PROBLEMS))
def test_model_new_matches_model_construction_on_cpu(problem, tmp_path):
    """Same constructor, same parameter/buffer names, same seeded values, state_dict both ways."""
    spec = enumerate_specs(problem, 16, 24, 40)[0]
    module = exec_file(generator.render(spec))
    ref_file = problems.load(problem, 16, 24, 40)
    Model, args = ref_file.Model, ref_file.init_args()
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
        module.ModelNew(*problems.load("gemm_scale_bn", 16, 24, 40).init_args())(x)
    assert module._KGEN_LIBRARIES == {}


def test_write_is_atomic_and_lands_at_the_default_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = ALL_SPECS[0]
    path = generator.write(spec)
    assert path == generator.default_path(spec) and path.read_text() == generator.render(spec)
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary left behind


GENERATED = sorted((Path(__file__).resolve().parent.parent / "generated").glob("*.py"))


def test_generated_holds_winners():
    assert GENERATED, "generated/ ships the search winners"


@pytest.mark.parametrize("path", GENERATED, ids=lambda p: p.name)
def test_committed_winners_are_clean_and_self_describing(path):
    """The files kgen ships in generated/ pass both sets of static rules (KernelBench's
    checker as restated), import without building, and carry the measurements of the search
    that chose them."""
    text = path.read_text()
    assert check_emitted(text) == []
    module = exec_file(text, path.stem)
    assert module._KGEN_LIBRARIES == {}
    m = module.KGEN_MEASURED
    assert m is not None and m["median_ms"] > 0 and m["eager_ms"] > 0
    assert f"{m['ratio']:.3f}x" in ast.get_docstring(ast.parse(text))


@pytest.mark.parametrize("path", GENERATED, ids=lambda p: p.name)
def test_committed_winners_are_what_kgen_makes_today(path, tmp_path):
    """A shipped file is exactly what today's kgen renders for its spec and measurement (so the
    file is current), and the command its header gives regenerates that spec."""
    text = path.read_text()
    module = exec_file(text, path.stem)
    spec = Spec.from_dict(module.KGEN_SPEC)
    assert generator.render(spec, module.KGEN_MEASURED) == text, "regenerate generated/ (kgen search)"
    command = re.search(r"regenerate with:\n\s+kgen (generate .*)", text).group(1).split()
    from click.testing import CliRunner

    from kgen.cli import main

    again = tmp_path / "again.py"
    r = CliRunner().invoke(main, command + ["-o", str(again)])
    assert r.exit_code == 0, r.output
    assert exec_file(again.read_text()).KGEN_SPEC == module.KGEN_SPEC


def test_search_index_lists_every_winner():
    index_path = Path(__file__).resolve().parent.parent / "generated" / "index.json"
    index = json.loads(index_path.read_text())
    assert sorted(index["winners"]) == [p.name for p in GENERATED]
    for name, entry in index["winners"].items():
        module = exec_file((index_path.parent / name).read_text(), "w")
        assert entry["spec"] == module.KGEN_SPEC and entry["measured"] == module.KGEN_MEASURED
        assert entry["key"] == Spec.from_dict(module.KGEN_SPEC).key()   # the file's build


class _Library(types.SimpleNamespace):
    """A stand-in for the ctypes library (hashable, as a CDLL is: the file keys data by it)."""
    __hash__ = object.__hash__


class _CFunction:
    """A stand-in for a ctypes function of the library (argtypes, restype) returning `value`."""

    def __init__(self, value):
        self.value = value

    def __call__(self, *args):
        return self.value


@pytest.mark.parametrize("capability, refused", [((8, 0), True), ((10, 0), True), ((9, 0), False)])
def test_wgmma_file_refuses_a_non_hopper_gpu_before_compiling(capability, refused, monkeypatch):
    """wgmma exists on sm_90 only: elsewhere build() says so instead of failing inside nvcc."""
    spec = next(s for s in enumerate_specs("gemm_scale_bn", 16, 24, 40) if s.family == "wgmma")
    module = exec_file(generator.render(spec))
    compiled = []
    monkeypatch.setattr(module.torch.cuda, "get_device_capability", lambda device=None: capability)
    monkeypatch.setattr(module.torch.cuda, "get_device_properties",
                        lambda device=None: types.SimpleNamespace(shared_memory_per_block_optin=232448))
    monkeypatch.setattr(module, "load_inline", lambda **kw: compiled.append(kw) or "lib.so")
    monkeypatch.setattr(module.ctypes, "CDLL", lambda path: _Library(
        kgen_forward_0=types.SimpleNamespace(), kgen_workspace_floats_0=types.SimpleNamespace(),
        kgen_w_split_floats_0=types.SimpleNamespace(), kgen_w_split_records_floats_0=types.SimpleNamespace(),
        kgen_trusted_w_split_floats_0=types.SimpleNamespace(),
        kgen_backward_0=types.SimpleNamespace(), kgen_backward_floats_0=types.SimpleNamespace(),
        kgen_output_is_operand_typed_0=_CFunction(1)))
    if refused:
        with pytest.raises(RuntimeError, match=r"wgmma.*sm_90a.*--backend kgen"):
            module._kgen_build()
        assert compiled == []
    else:
        module._kgen_build()
        assert [kw["extra_cuda_cflags"][-1] for kw in compiled] == ["-gencode=arch=compute_90a,code=sm_90a"]


@pytest.mark.parametrize("math", ["fp16x3", "tf32x3"])
def test_every_size_the_library_gives_is_read_as_a_64_bit_integer(monkeypatch, math):
    """Each kgen_<what>_floats_<part> the file asks (_KGEN_FLOATS_EXPORTS: a kept split of w passes
    2^31 floats at 32768 x 65536) is declared to return a long long, not ctypes' default int: the
    file's own list of them is its CUDA source's exports, each given the type (w's split's sizes
    in an fp16x3 file alone: no other GEMM splits w)."""
    import re

    spec = next(s for s in enumerate_specs("gemm_scale_bn", 16, 24, 40) if s.family == "wgmma" and s.math == math)
    module = exec_file(generator.render(spec))
    monkeypatch.setattr(module.torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    monkeypatch.setattr(module.torch.cuda, "get_device_properties",
                        lambda device=None: types.SimpleNamespace(shared_memory_per_block_optin=232448))
    monkeypatch.setattr(module, "load_inline", lambda **kw: "lib.so")
    sizes = {f"kgen_{what}_floats_0": _CFunction(0) for what in module._KGEN_FLOATS_EXPORTS}
    library = _Library(kgen_forward_0=types.SimpleNamespace(), kgen_backward_0=types.SimpleNamespace(),
                       kgen_backward_floats_0=types.SimpleNamespace(), kgen_output_is_operand_typed_0=_CFunction(1), **sizes)
    monkeypatch.setattr(module.ctypes, "CDLL", lambda path: library)
    module._kgen_build()
    assert all(f.restype is module.ctypes.c_longlong for f in sizes.values())
    exported = set(re.findall(r"KGEN_EXPORT long long (kgen_\w+_floats)_0\(", generator.render_cuda_source(spec)))
    assert exported - {"kgen_backward_floats"} == {f"kgen_{what}_floats" for what in module._KGEN_FLOATS_EXPORTS}
    assert ("w_split" in module._KGEN_FLOATS_EXPORTS) == (math == "fp16x3")


def test_file_refuses_a_gpu_with_too_little_shared_memory(monkeypatch):
    """A file made for Hopper's 227 KB says so on a 99 KB GPU instead of failing at launch."""
    spec = Spec.of("gemm_scale_bn", 16, 24, 40, math="tf32x3", backend="kgen", fusion=2,
                   tile=Tile(128, 128, 64, 64, 32, stages=3))
    module = exec_file(generator.render(spec))
    assert module.KGEN_SMEM_BYTES > 101376
    monkeypatch.setattr(module.torch.cuda, "get_device_capability", lambda device=None: (8, 6))
    monkeypatch.setattr(module.torch.cuda, "get_device_properties",
                        lambda device=None: types.SimpleNamespace(shared_memory_per_block_optin=101376))
    monkeypatch.setattr(module, "load_inline", lambda **kw: pytest.fail("compiled"))
    with pytest.raises(RuntimeError, match=r"needs \d+ bytes of shared memory.*allows 101376.*--arch sm_86"):
        module._kgen_build()


@pytest.mark.parametrize("hopper", [True, False], ids=["wgmma", "kgen"])
def test_the_gpu_tiers_planted_faults_find_their_sites(hopper):
    """tests/test_faults.py plants faults by replacing text in the rendered softmax file; each text
    must occur there as often as that file says (checked here, without a GPU: a change to the
    generated code once left a GPU test asserting on sites that were no longer there)."""
    import test_faults

    source = generator.render(test_faults.softmax_spec(hopper))
    found = {site: source.count(site) for site in test_faults.SOFTMAX_SITES}
    assert found == test_faults.SOFTMAX_SITES
