"""What a reference defines for itself, through the emitted file (session 18: modules others
wrote, /work/fuzz18's probe):

- get_init_inputs() handing the constructor an Enum member or a config object of a class the
  reference defines: beside the reference in one namespace, with the reference's own
  get_init_inputs() (KernelBench's eval), ModelNew builds the model the reference builds (the
  file's copy of the reference takes the reference's classes), and imported alone too;
- a reference that reads __file__ at its top level (a module made for the copy has none);
- forward(self, *args) with args[0] (or (x,) = args), and forward(self, x, **kwargs) reading a
  keyword with its default: the IR of forward(self, x)."""

import textwrap

import pytest
import torch
from click.testing import CliRunner

from kgen.cli import main
from kgen.frontend.reference import Reference
from kgen.frontend.trace import trace
from kgen.ir.graph import Unsupported

from test_styles import assert_same_state, seeded_state

CLASSES = '''
import dataclasses
import enum

import torch
import torch.nn as nn


class Act(enum.Enum):
    GELU = "gelu"
    PRELU = "prelu"


@dataclasses.dataclass
class Config:
    in_features: int
    out_features: int


class Model(nn.Module):
    def __init__(self, cfg, act):
        super().__init__()
        cfg = cfg if isinstance(cfg, Config) else Config(**cfg)
        self.fc = nn.Linear(cfg.in_features, cfg.out_features)
        self.act = nn.PReLU(cfg.out_features, 0.1) if act is Act.PRELU else nn.GELU()

    def forward(self, x):
        return self.act(self.fc(x))


def get_inputs():
    return [torch.rand(16, 32)]


def get_init_inputs():
    return [Config(32, 64), Act.PRELU]
'''

FILE_NAME = '''
import os

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.tanh(self.fc(x))


def get_inputs():
    return [torch.rand(16, 32)]


def get_init_inputs():
    return [32, 64]
'''


def generate(tmp_path, source: str):
    ref = tmp_path / "ref.py"
    ref.write_text(textwrap.dedent(source))
    out = tmp_path / "new.py"
    result = CliRunner().invoke(main, ["generate", str(ref), "-o", str(out), "--force",
                                       "--results-dir", str(tmp_path / "results")])
    assert result.exit_code == 0, result.output
    return ref.read_text(), out.read_text()


def test_init_objects_of_the_references_classes_build_the_references_model(tmp_path):
    ref_src, new_src = generate(tmp_path, CLASSES)
    # KernelBench's eval: the reference, then the emitted file, in one namespace; the model is
    # built from the reference's get_init_inputs(), taken before the file ran.
    ctx: dict = {}
    exec(compile(ref_src, "ref.py", "exec"), ctx)
    init = ctx["get_init_inputs"]()
    expect = seeded_state(ctx["Model"], init)
    assert "act.weight" in expect   # the reference's own branch: PReLU
    exec(compile(new_src, "new.py", "exec"), ctx)
    assert_same_state(seeded_state(ctx["ModelNew"], init), expect, "ModelNew beside the reference")
    assert ctx["Act"] is init[1].__class__ and ctx["Config"] is init[0].__class__   # not rebound
    # Imported alone: its own copy's classes, through its get_init_inputs(); and the objects of
    # another execution of the reference (kgen validate's, whose Reference loads it apart)
    alone: dict = {}
    exec(compile(new_src, "new.py", "exec"), alone)
    assert_same_state(seeded_state(alone["ModelNew"], alone["get_init_inputs"]()), expect, "alone")
    apart: dict = {}
    exec(compile(ref_src, "ref.py", "exec"), apart)
    assert_same_state(seeded_state(alone["ModelNew"], apart["get_init_inputs"]()), expect,
                      "alone, with another execution's objects")
    # as a keyword argument too
    cfg, act = apart["get_init_inputs"]()
    torch.manual_seed(42)
    assert_same_state(alone["ModelNew"](cfg, act=act).state_dict(), expect, "keyword")


def test_a_reference_that_reads_its_file_name_runs_in_the_emitted_file(tmp_path):
    ref_src, new_src = generate(tmp_path, FILE_NAME)
    alone: dict = {}
    exec(compile(new_src, "new.py", "exec"), alone)   # (exec: no __file__ here either)
    ref: dict = {"__file__": str(tmp_path / "ref.py")}
    exec(compile(ref_src, "ref.py", "exec"), ref)
    init = ref["get_init_inputs"]()
    assert_same_state(seeded_state(alone["ModelNew"], init), seeded_state(ref["Model"], init), "alone")


def forward_module(tmp_path, name: str, signature: str, body: str) -> Reference:
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(f'''
        import torch
        import torch.nn as nn


        class Model(nn.Module):
            def __init__(self, in_features, out_features):
                super().__init__()
                self.fc = nn.Linear(in_features, out_features)

            def forward({signature}):
                {body}
                return torch.tanh(self.fc(x)) * scale


        def get_inputs():
            return [torch.rand(16, 32)]


        def get_init_inputs():
            return [32, 64]
        '''))
    return Reference(path)


FORWARDS = {
    "*args, args[0]": ("self, *args", "x = args[0]; scale = 2.0"),
    "*inputs, unpacked": ("self, *inputs", "(x,) = inputs; scale = 2.0"),
    "**kwargs, get with a default": ("self, x, **kwargs", "scale = kwargs.get('scale', 2.0)"),
    "**kwargs unread": ("self, x, **kwargs", "scale = 2.0"),
}


@pytest.mark.parametrize("name", sorted(FORWARDS))
def test_forward_signatures_trace_as_one_input(name, tmp_path):
    signature, body = FORWARDS[name]
    got = trace(forward_module(tmp_path, "spelled", signature, body)).describe()
    assert got == trace(forward_module(tmp_path, "plain", "self, x", "scale = 2.0")).describe()


@pytest.mark.parametrize("signature, body, message", [
    ("self, *args", "x = args[1]; scale = 2.0", r"args\[1\]"),
    ("self, x, **kwargs", "scale = kwargs['scale']", r"\*\*kwargs"),
])
def test_forward_signatures_read_otherwise_are_refused(signature, body, message, tmp_path):
    with pytest.raises(Unsupported, match=message):
        trace(forward_module(tmp_path, "refused", signature, body))
