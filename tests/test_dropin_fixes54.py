"""The emitted file as a drop-in replacement, where a probe (session 54) found it was not one:

- a parameter of an nn.ParameterList (named 0, 1, ...), of an nn.ParameterDict under a key that
  is no identifier (scale-1), or a buffer named 0: the forward read it with get_submodule, which
  finds modules only (kgen.ir.graph.self_attr);
- pickle.dumps / torch.save of a ModelNew whose reference defines classes of its own (a child
  module, an Enum kept on the model): the reference's copy was a module missing from sys.modules;
- `from __future__ import annotations` with a @dataclass: dataclasses looks the class's module
  up in sys.modules as it makes the class (kgen generate refused the reference);
- a reference whose path holds the word KernelBench's checker bans (forward-pass/, relu-pass.py):
  the header's regenerate line and KGEN_SPEC's problem wrote it bare;
- inspect.signature(ModelNew) was (*args, **kwargs) wherever the reference defines a class;
- a config of __slots__, or one nesting another, made by another execution of the reference, was
  not taken as the copy's (the constructor's isinstance check failed).

Every reference here is written by the test itself; nothing needs a GPU."""

import ast
import importlib.util
import inspect
import io
import pickle
import subprocess
import sys
import textwrap

import pytest
import torch
from click.testing import CliRunner

from kgen.check.static_checks import check_emitted, kernelbench_strict_matches
from kgen.cli import main
from kgen.codegen.generator import _attribute_read, checker_safe
from kgen.frontend.reference import Reference
from kgen.ir.graph import self_attr

from test_styles import assert_same_state, seeded_state

HEAD = '''
import dataclasses
import enum

import torch
import torch.nn as nn
'''

TAIL = '''

def get_inputs():
    return [torch.rand(16, 32)]
'''


def generate(path, source: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source))
    out = path.parent / f"{path.stem.replace('-', '_')}_new.py"
    result = CliRunner().invoke(main, ["generate", str(path), "-o", str(out), "--force",
                                       "--results-dir", str(path.parent / "results")])
    assert result.exit_code == 0, result.output
    return out.read_text()


def executed(source: str, ctx: dict | None = None) -> dict:
    """`source` run as KernelBench's eval runs a file: exec in a namespace."""
    ctx = {} if ctx is None else ctx
    exec(compile(source, "<string>", "exec"), ctx)
    return ctx


@pytest.fixture
def imported():
    """Imports a file as a module of a given name, as importlib imports one (registered in
    sys.modules first). What the test registered there (those modules, the reference copies of
    the emitted files it ran) goes afterwards."""
    before = set(sys.modules)
    names = []

    def load(path, name: str):
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        names.append(name)
        spec.loader.exec_module(module)
        return module

    yield load
    for name in set(sys.modules) - before:
        if name.startswith("kgen_reference_") or name.split(".")[0] in names:
            del sys.modules[name]


# ---- 1. parameters of a ParameterList / ParameterDict, buffers named 0 ------------------------
def forward_self_reads(new_src: str) -> list[str]:
    """Every maximal expression of ModelNew.forward that reads from `self` by attribute,
    subscript, get_submodule or getattr (a method call on one is not a read); in
    _kgen_forward_rows, where a (..., features) input's forward reshapes around it."""
    (cls,) = [n for n in ast.parse(new_src).body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"]
    methods = {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef)}
    fwd = methods.get("_kgen_forward_rows", methods["forward"])

    def rooted(node) -> bool:
        if isinstance(node, ast.Name):
            return node.id == "self"
        if isinstance(node, (ast.Attribute, ast.Subscript)):
            return rooted(node.value)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
            return rooted(node.args[0])
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get_submodule":
            return rooted(node.func.value)
        return False

    reads = [n for n in ast.walk(fwd) if not isinstance(n, ast.Name) and rooted(n)]
    inner = set()
    for n in reads:
        for child in ast.walk(n):
            if child is not n:
                inner.add(id(child))
    called = {id(n.func) for n in ast.walk(fwd) if isinstance(n, ast.Call)}
    return [ast.unparse(n) for n in reads if id(n) not in inner and id(n) not in called]


def test_self_attr_reads_parameters_of_containers_by_getattr():
    assert self_attr("fc.weight") == "self.fc.weight"
    assert self_attr("ps.0") == "getattr(self.get_submodule('ps'), '0')"
    assert self_attr("net.0.bias") == "self.get_submodule('net.0').bias"
    assert self_attr("pd.scale-1") == "getattr(self.get_submodule('pd'), 'scale-1')"
    assert self_attr("0") == "getattr(self, '0')"
    assert self_attr("blk.lambda") == "getattr(self.get_submodule('blk'), 'lambda')"
    assert _attribute_read("blk.lambda") == "getattr(self._modules['blk'], 'lambda')"
    assert _attribute_read("net.1.negative_slope") == "self._modules['net']._modules['1'].negative_slope"


CONTAINERS = HEAD + '''

class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.ps = nn.ParameterList([nn.Parameter(torch.randn(out_features, in_features) * 0.05),
                                    nn.Parameter(torch.zeros(out_features))])
        self.pd = nn.ParameterDict({"scale-1": nn.Parameter(torch.ones(out_features))})
        self.bufs = nn.Module()
        self.bufs.register_buffer("0", torch.full((out_features,), 0.5))

    def forward(self, x):
        y = torch.relu(x @ self.ps[0].t() + self.ps[1]) * self.pd["scale-1"]
        return y + getattr(self.bufs, "0")


def get_init_inputs():
    return [32, 64]
''' + TAIL


def test_the_forward_reads_parameter_lists_dicts_and_buffers_named_by_numbers(tmp_path, imported):
    new_src = generate(tmp_path / "containers.py", CONTAINERS)
    ctx = executed(new_src)
    model = ctx["ModelNew"](*ctx["get_init_inputs"]())
    reads = forward_self_reads(new_src)
    tensors = [eval(expr, {"self": model}) for expr in reads]   # noqa: S307 - the file's own reads
    expect = {id(t) for t in (model.ps[0], model.ps[1], model.pd["scale-1"], getattr(model.bufs, "0"))}
    assert expect <= {id(t) for t in tensors}, reads


# ---- 2. pickling a ModelNew whose reference defines classes ----------------------------------
CLASSES = HEAD + '''

class Act(enum.Enum):
    RELU = 1
    TANH = 2


class Block(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        return self.fc(x)


class Model(nn.Module):
    def __init__(self, in_features, out_features, scale: float = 2.0):
        super().__init__()
        self.block = Block(in_features, out_features)
        self.act = Act.RELU

    def forward(self, x):
        return torch.relu(self.block(x))


def get_init_inputs():
    return [32, 64]
''' + TAIL


def test_a_model_of_the_references_classes_pickles_and_saves(tmp_path, imported):
    new_src = generate(tmp_path / "classes.py", CLASSES)
    module = imported(tmp_path / "classes_new.py", "classes_new")
    torch.manual_seed(0)
    model = module.ModelNew(32, 64)
    again = pickle.loads(pickle.dumps(model))
    assert type(again) is module.ModelNew and type(again.block) is module._kgen_reference.Block
    assert again.act is model.act
    assert_same_state(again.state_dict(), model.state_dict(), "pickled")
    buffer = io.BytesIO()
    torch.save(model, buffer)
    buffer.seek(0)
    assert_same_state(torch.load(buffer, weights_only=False).state_dict(), model.state_dict(), "torch.save")
    # In a new process: unpickling imports the emitted file, which registers its reference's copy.
    (tmp_path / "model.pkl").write_bytes(pickle.dumps(model))
    code = (f"import pickle, sys; sys.path.insert(0, {str(tmp_path)!r}); "
            f"m = pickle.load(open({str(tmp_path / 'model.pkl')!r}, 'rb')); "
            "print(type(m).__module__, type(m.block).__module__, m.act)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.stdout.split() == ["classes_new", "classes_new._kgen_reference", "Act.RELU"], done.stderr
    # Two imports of the file, and two executions of it in one namespace, stay apart.
    other = imported(tmp_path / "classes_new.py", "classes_other")
    assert other._kgen_reference.__name__ == "classes_other._kgen_reference"
    assert type(pickle.loads(pickle.dumps(other.ModelNew(32, 64))).block) is other._kgen_reference.Block
    ctx = executed(new_src)
    first = ctx["_kgen_reference"]
    executed(new_src, ctx)
    second = ctx["_kgen_reference"]
    assert first.__name__ != second.__name__
    for copy in (first, module._kgen_reference, second):
        assert sys.modules[copy.__name__] is copy and copy.Block.__module__ == copy.__name__
        assert pickle.loads(pickle.dumps(copy.Act.TANH)) is copy.Act.TANH


# ---- 3. from __future__ import annotations with a @dataclass ---------------------------------
FUTURE = '''
from __future__ import annotations
''' + HEAD + '''

@dataclasses.dataclass
class Config:
    in_features: int
    out_features: int
    scale: float = 2.0


class Model(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.fc = nn.Linear(cfg.in_features, cfg.out_features)

    def forward(self, x):
        return torch.relu(self.fc(x))


def get_init_inputs():
    return [Config(32, 64)]
''' + TAIL


def test_a_dataclass_under_future_annotations_is_generated_and_built(tmp_path, imported):
    path = tmp_path / "future.py"
    new_src = generate(path, FUTURE)
    assert "kgen_reference_future" not in sys.modules   # the frontend's registration is undone
    Reference(path)
    assert "kgen_reference_future" not in sys.modules
    ref_src = path.read_text()
    expect = seeded_state(executed(ref_src)["Model"], executed(ref_src)["get_init_inputs"]())
    ctx = executed(ref_src)
    executed(new_src, ctx)
    assert_same_state(seeded_state(ctx["ModelNew"], ctx["get_init_inputs"]()), expect, "beside the reference")
    module = imported(tmp_path / "future_new.py", "future_new")
    assert_same_state(seeded_state(module.ModelNew, module.get_init_inputs()), expect, "imported")


# ---- 4. a reference path with the word the checker bans --------------------------------------
@pytest.mark.parametrize("text", ["/tmp/forward-pass/relu-pass.py", "a\\pass", "\ttry: x", "no, except it",
                                  "\\\\pass", "pass-try:"])
def test_checker_safe_reads_back_the_same_string(text):
    literal = checker_safe(repr(text))
    assert ast.literal_eval(literal) == text
    assert kernelbench_strict_matches(literal) == []


def test_a_reference_under_a_path_with_a_banned_word_is_generated_with_that_path(tmp_path, imported):
    path = tmp_path / "forward-pass" / "relu-pass.py"
    new_src = generate(path, HEAD + '''

class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.linear(x))


def get_init_inputs():
    return [32, 64]
''' + TAIL)
    assert check_emitted(new_src) == []
    module = imported(path.parent / "relu_pass_new.py", "relu_pass_new")
    assert module.KGEN_SPEC["problem"] == str(path)
    assert f"kgen generate {path} --batch" in module.__doc__
    assert module.ModelNew.__doc__.startswith("ModelNew for relu-pass.")


# ---- 5. ModelNew's signature -----------------------------------------------------------------
def test_model_new_has_the_references_constructor_signature(tmp_path, imported):
    generate(tmp_path / "classes.py", CLASSES)
    module = imported(tmp_path / "classes_new.py", "classes_new")
    assert str(inspect.signature(module.ModelNew)) == "(in_features, out_features, scale: float = 2.0)"
    assert inspect.signature(module.ModelNew) == inspect.signature(module._kgen_reference.Model)


# ---- 6. configs of __slots__, frozen, nesting another ----------------------------------------
CONFIGS = HEAD + '''

@dataclasses.dataclass(slots=True)
class Inner:
    out_features: int = 64


@dataclasses.dataclass(frozen=True, slots=True)
class Frozen:
    scale: float = 2.0


@dataclasses.dataclass
class Config:
    in_features: int = 32
    inner: Inner = dataclasses.field(default_factory=Inner)
    frozen: Frozen = dataclasses.field(default_factory=Frozen)


class Model(nn.Module):
    def __init__(self, cfg, inner):
        super().__init__()
        assert isinstance(cfg, Config) and isinstance(cfg.inner, Inner) and isinstance(cfg.frozen, Frozen)
        assert isinstance(inner, Inner)
        self.fc = nn.Linear(cfg.in_features, inner.out_features)

    def forward(self, x):
        return torch.relu(self.fc(x))


def get_init_inputs():
    return [Config(), Inner()]
''' + TAIL


def test_configs_of_slots_and_nested_configs_are_taken_as_the_copys(tmp_path, imported):
    path = tmp_path / "configs.py"
    new_src = generate(path, CONFIGS)
    ref_src = path.read_text()
    ctx = executed(ref_src)
    init = ctx["get_init_inputs"]()
    expect = seeded_state(ctx["Model"], init)
    executed(new_src, ctx)   # KernelBench's eval: the reference's objects, the copy's classes
    assert_same_state(seeded_state(ctx["ModelNew"], init), expect, "beside the reference")
    cfg, _ = init
    assert type(cfg) is ctx["Config"] and type(cfg.inner) is ctx["Inner"]   # the caller's, untouched
