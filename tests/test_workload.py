"""The workload is what the reference says, under whatever names it uses, and everything kgen
remembers about it is keyed by the reference's content, not its path."""

import shutil
import textwrap
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from kgen.tune import choose
from kgen.cli import main
from kgen.frontend.reference import Reference, ReferenceError
from kgen.tune.search import MeasurementCache
from kgen.tune.spec import Spec, Tile

REPO = Path(__file__).resolve().parent.parent

# A module whose constants are not KernelBench's usual names, with a constant derived from one
# (KernelBench 33 writes `scale_shape = (out_features,)`).
NAMED = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, input_size, hidden_size, scale_shape):
        super(Model, self).__init__()
        self.gemm = nn.Linear(input_size, hidden_size)
        self.scale = nn.Parameter(torch.randn(scale_shape))

    def forward(self, x):
        return torch.relu(self.gemm(x) * self.scale)


batch = 8
input_size = 16
hidden_size = 32
scale_shape = (hidden_size,)


def get_inputs():
    return [torch.rand(batch, input_size)]


def get_init_inputs():
    return [input_size, hidden_size, scale_shape]
'''

# No constants at all: literals everywhere.
LITERALS = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 24)

    def forward(self, x):
        return torch.sigmoid(self.fc(x))


def get_inputs():
    return [torch.randn(6, 16)]


def get_init_inputs():
    return []
'''


def write(folder: Path, text: str, name: str = "ref.py") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


def test_options_map_onto_the_constants_the_file_names(tmp_path):
    ref = Reference(write(tmp_path, NAMED), {"batch": 4, "in_features": 12, "out_features": 40})
    assert ref.set_constants == {"batch": 4, "input_size": 12, "hidden_size": 40}
    assert tuple(ref.input.shape) == (4, 12)
    # The derived constant followed hidden_size: the module builds at the new width.
    assert ref.module.scale_shape == (40,)
    model = ref.meta_model()
    assert tuple(model.scale.shape) == (40,) and tuple(model.gemm.weight.shape) == (40, 12)


def test_set_names_any_constant_and_unknown_names_are_refused(tmp_path):
    path = write(tmp_path, NAMED)
    ref = Reference(path, constants={"hidden_size": 48})
    assert ref.module.scale_shape == (48,) and ref.init_args()[1] == 48
    with pytest.raises(ReferenceError, match="no module-level constant 'width'.*input_size"):
        Reference(path, constants={"width": 3})


def test_a_file_without_constants_takes_its_own_shape_and_any_batch(tmp_path):
    path = write(tmp_path, LITERALS)
    ref = Reference(path, {"batch": 6, "in_features": 16, "out_features": 24})   # as it says: fine
    assert ref.set_constants == {} and tuple(ref.input.shape) == (6, 16)
    ref = Reference(path, {"batch": 15})   # no constant: rows of repeated get_inputs() calls
    torch.manual_seed(0)
    (x,) = ref.inputs()
    assert tuple(x.shape) == (15, 16)
    assert x.min() < -1 and x.max() > 1, "the reference's own distribution (randn), not rand"
    with pytest.raises(ReferenceError, match="--in 32: no module-level constant sets"):
        Reference(path, {"in_features": 32})


def test_generate_says_what_the_options_changed_and_refuses_what_cannot_apply(tmp_path):
    path = write(tmp_path, NAMED)
    r = CliRunner().invoke(main, ["generate", str(path), "--out", "64", "-o", str(tmp_path / "a.py")])
    assert r.exit_code == 0, r.output
    assert "workload: hidden_size = 64" in r.output
    text = (tmp_path / "a.py").read_text()
    assert "_KGEN_REFERENCE_CONSTANTS = {'hidden_size': 64}" in text and "--out 64" in text
    ns: dict = {}
    exec(compile(text, "a.py", "exec"), ns)
    model = ns["ModelNew"](*ns["get_init_inputs"]())
    assert tuple(model.scale.shape) == (64,)   # the pinned constant, and what derives from it
    r = CliRunner().invoke(main, ["generate", str(write(tmp_path, LITERALS, "lit.py")), "--in", "8",
                                  "-o", str(tmp_path / "b.py")])
    assert r.exit_code == 2 and "no module-level constant sets the input's features" in r.output


def _spec(path: Path) -> Spec:
    return Spec.of(str(path), 8, 16, 32, math="tf32x3", backend="wgmma", fusion=1,
                   tile=Tile(128, 128, 32, 16, 128, stages=4))


def test_measurements_are_keyed_by_the_references_content_not_its_name(tmp_path):
    a = write(tmp_path / "a", NAMED)
    b = write(tmp_path / "b", NAMED.replace("torch.relu", "torch.sigmoid"))
    assert a.name == b.name
    keys = {MeasurementCache.key(_spec(p), "GPU", "eval") for p in (a, b)}
    assert len(keys) == 2, "two references of one file name must never share a measurement"
    c = write(tmp_path / "c", NAMED)   # the same content elsewhere: the same measurement
    assert MeasurementCache.key(_spec(a), "GPU", "eval") == MeasurementCache.key(_spec(c), "GPU", "eval")


def test_a_copied_reference_finds_the_shipped_records_by_content(tmp_path, monkeypatch):
    """A clone, a copy or another working directory finds the winners shipped in results/."""
    original = REPO / "tests" / "refs" / "gemm_groupnorm_hardtanh.py"
    copy = tmp_path / "elsewhere" / "my_module.py"
    copy.parent.mkdir()
    shutil.copy(original, copy)
    monkeypatch.chdir(tmp_path)
    found = choose.earlier_winner(str(copy), 1024, 8192, 8192, "sm_90a", REPO / "results")
    assert found is not None
    spec, measured, _ = found
    assert spec.problem == str(copy) and measured["median_ms"] > 0
    edited = tmp_path / "edited.py"
    edited.write_text(original.read_text().replace("Hardtanh", "Hardtanh ", 1))
    assert choose.earlier_winner(str(edited), 1024, 8192, 8192, "sm_90a", REPO / "results") is None


def test_records_carry_no_absolute_paths():
    for path in [*(REPO / "results").glob("*.json"), REPO / "generated" / "index.json"]:
        assert str(REPO) not in path.read_text(), path


def _module(init: str, forward: str, constants: str, get_inputs: str, init_args: str, head: str = "") -> str:
    return f'''{head}
import torch
import torch.nn as nn


{constants}


class Model(nn.Module):
    def __init__(self, *args):
        super(Model, self).__init__()
{textwrap.indent(textwrap.dedent(init).strip(), "        ")}

    def forward(self, x):
{textwrap.indent(textwrap.dedent(forward).strip(), "        ")}


def get_inputs():
    return [{get_inputs}]


def get_init_inputs():
    return {init_args}
'''


def test_options_set_by_one_constant_cannot_both_hold(tmp_path):
    path = write(tmp_path, _module("self.fc = nn.Linear(args[0], args[1])", "return torch.relu(self.fc(x))",
                                   "batch_size = 16\nfeatures = 64", "torch.rand(batch_size, features)",
                                   "[features, features]"))
    with pytest.raises(ReferenceError, match="cannot hold"):
        Reference(path, {"in_features": 32, "out_features": 128})
    ref = Reference(path, {"in_features": 32, "out_features": 32})   # both at once: fine
    assert ref.set_constants == {"features": 32}
    with pytest.raises(ReferenceError, match="undone"):
        Reference(path, {"batch": 4}, {"batch_size": 8})


def test_a_batch_without_a_constant_survives_other_options(tmp_path):
    path = write(tmp_path, _module("self.fc = nn.Linear(args[0], 32)", "return torch.relu(self.fc(x))",
                                   "in_features = 64", "torch.rand(16, in_features)", "[in_features]"))
    ref = Reference(path, {"batch": 40, "in_features": 48})
    assert tuple(ref.input.shape) == (40, 48) and tuple(ref.inputs()[0].shape) == (40, 48)


def test_out_is_the_constant_that_moves_only_it(tmp_path):
    derived = write(tmp_path / "derived", _module(
        "self.fc = nn.Linear(args[0], args[1])", "return torch.relu(self.fc(x))",
        "batch_size = 8\nin_features = 16\nout_features = in_features * 2",
        "torch.rand(batch_size, in_features)", "[in_features, out_features]"))
    assert Reference(derived, {"out_features": 48}).set_constants == {"out_features": 48}
    layers = write(tmp_path / "layers", _module(
        "self.layers = nn.ModuleList([nn.Linear(args[0] if i == 0 else args[1], args[1]) for i in range(args[2])])",
        "for layer in self.layers:\n    x = torch.relu(layer(x))\nreturn x",
        "batch_size = 8\nin_features = 16\nout_features = 32\nnum_layers = 2",
        "torch.rand(batch_size, in_features)", "[in_features, out_features, num_layers]"))
    assert Reference(layers, {"out_features": 64}).set_constants == {"out_features": 64}


def test_emitted_files_keep_the_references_names_and_future_imports(tmp_path):
    """A helper named like one of the emitted file's own functions stays the reference's in
    KernelBench's one namespace; a file with `from __future__ import annotations` and names only
    its annotations use loads with constants pinned, statement by statement."""
    source = _module("self.fc = build(args[0], args[1])", "return torch.relu(self.fc(x))",
                     "batch_size = 8\nin_features = 16\nout_features = 32\n\n\n"
                     "def build(i, o):\n    return nn.Linear(i, o)\n\n\n"
                     "if typing.TYPE_CHECKING:\n    from torch import Tensor",
                     "torch.rand(batch_size, in_features)", "[in_features, out_features]",
                     head="from __future__ import annotations\nimport typing")
    source = source.replace("def forward(self, x):", "def forward(self, x: Tensor) -> Tensor:")
    path = write(tmp_path, source)
    out = tmp_path / "new.py"
    r = CliRunner().invoke(main, ["generate", str(path), "--out", "24", "-o", str(out)])
    assert r.exit_code == 0, r.output
    ctx: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), ctx)
    build = ctx["build"]
    exec(compile(out.read_text(), str(out), "exec"), ctx)
    assert ctx["build"] is build
    model = ctx["ModelNew"](*ctx["get_init_inputs"]())
    assert tuple(model.fc.weight.shape) == (24, 16)


def test_set_refuses_values_a_file_cannot_hold(tmp_path):
    path = write(tmp_path, NAMED)
    for bad in ("nan", "inf", "1e400"):
        r = CliRunner().invoke(main, ["generate", str(path), "--set", f"hidden_size={bad}", "-o", str(tmp_path / "x.py")])
        assert r.exit_code == 2 and "finite" in r.output
