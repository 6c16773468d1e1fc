"""Loading an emitted file whose reference moved (CPU: loading builds nothing)."""

import shutil
from pathlib import Path

import pytest

from kgen.codegen import generator
from kgen.frontend import problems
from kgen.check.loading import EmittedFile
from kgen.tune.spec import Spec, Tile

REF = Path(__file__).parent / "refs" / "gemm_mul_leakyrelu.py"


def emit(tree: Path) -> Path:
    """tree/refs/R.py and tree/out/R_file.py, generated where they are."""
    (tree / "refs").mkdir(parents=True)
    ref = tree / "refs" / REF.name
    shutil.copy(REF, ref)
    spec = Spec.of(str(ref), 64, 128, 256, math="tf32x3", backend="kgen", fusion=1,
                   tile=Tile(128, 128, 32, 64, 32, stages=3))
    path = generator.write(spec, tree / "out" / f"{spec.name()}.py")
    # as in a later process: nothing loaded from where the reference was
    problems.load.cache_clear()
    problems.graph.cache_clear()
    return path


def test_a_moved_tree_finds_its_reference_by_path_tail_and_hash(tmp_path, monkeypatch):
    emitted = emit(tmp_path / "a")
    shutil.move(tmp_path / "a", tmp_path / "b")
    monkeypatch.chdir(tmp_path)
    f = EmittedFile(tmp_path / "b" / "out" / emitted.name)
    assert Path(f.spec.problem) == tmp_path / "b" / "refs" / REF.name
    assert f.reference.path == tmp_path / "b" / "refs" / REF.name


def test_a_moved_reference_with_other_content_is_not_taken(tmp_path, monkeypatch):
    emitted = emit(tmp_path / "a")
    shutil.move(tmp_path / "a", tmp_path / "b")
    moved = tmp_path / "b" / "refs" / REF.name
    moved.write_text(moved.read_text() + "\n# edited\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KGEN_CACHE_DIR", str(tmp_path / "cache"))
    # Not the edited one: the copy of the reference the emitted file carries, byte for byte.
    f = EmittedFile(tmp_path / "b" / "out" / emitted.name)
    assert f.reference_embedded and not f.reference_changed
    assert f.reference.path.parent.parent == tmp_path / "cache" / "references"
    assert f.reference.source == REF.read_text()
    # --ref names it explicitly (an edited reference is still the yardstick, and said to be)
    f = EmittedFile(tmp_path / "b" / "out" / emitted.name, ref=moved)
    assert f.reference_changed


@pytest.mark.parametrize("body, runs_one", [("x = self.bn(x)", True), ("x = torch.relu(x)", False)])
def test_has_batchnorm_means_one_the_forward_runs(tmp_path, body, runs_one):
    """A BatchNorm1d the module holds but its forward never calls changes nothing the checks see
    (batch 1 in training raises only where one runs): has_batchnorm follows the IR, with or
    without --ref."""
    from click.testing import CliRunner
    from kgen.cli import main
    from conftest import module_source

    ref = tmp_path / "held_bn.py"
    ref.write_text(module_source(body, {"bn": "nn.BatchNorm1d(out_features)"}, out_features=64))
    out = tmp_path / "new.py"
    assert CliRunner().invoke(main, ["generate", str(ref), "-o", str(out)]).exit_code == 0
    assert EmittedFile(out).has_batchnorm is runs_one
    assert EmittedFile(out, ref=ref).has_batchnorm is runs_one


HELPER_USER = '''
import torch
import torch.nn as nn
from my_helpers_60 import squash


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        return squash(self.fc(x))


def get_inputs():
    return [torch.randn(64, 128)]


def get_init_inputs():
    return [128, 256]
'''


def test_a_reference_importing_a_module_beside_it_loads_as_a_script_would(tmp_path, monkeypatch):
    """`from my_helpers_60 import squash` of a file beside the reference: found by kgen's tracing
    (the reference's folder first on the path, as python puts a script's) and by the emitted
    file's loading from another folder, the path as it was after each."""
    import sys

    from kgen.frontend.reference import Reference
    from kgen.frontend.trace import trace

    (tmp_path / "refs").mkdir()
    (tmp_path / "refs" / "my_helpers_60.py").write_text("import torch\n\ndef squash(x):\n    return torch.tanh(x) * 3\n")
    ref = tmp_path / "refs" / "helper_user.py"
    ref.write_text(HELPER_USER)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "my_helpers_60", raising=False)
    path_before = list(sys.path)
    graph = trace(Reference(str(ref)))
    assert [n.op for n in graph.live() if n.kind == "pointwise"][-2:] == ["tanh", "mul"]
    assert sys.path == path_before
    spec = Spec.of(str(ref), 64, 128, 256, math="tf32x3", backend="kgen", fusion=1,
                   tile=Tile(128, 128, 32, 64, 32, stages=3))
    emitted = generator.write(spec, tmp_path / "out" / f"{spec.name()}.py")
    monkeypatch.delitem(sys.modules, "my_helpers_60", raising=False)
    f = EmittedFile(emitted)
    assert f.reference.path == ref and sys.path == path_before
    # (without the folder on the path, the same load fails: what the fix is for)
    monkeypatch.delitem(sys.modules, "my_helpers_60", raising=False)
    (tmp_path / "refs" / "my_helpers_60.py").rename(tmp_path / "elsewhere.py")
    with pytest.raises(ValueError, match="No module named 'my_helpers_60'"):
        EmittedFile(emitted)


def test_two_references_importing_helpers_of_one_name_each_run_their_own(tmp_path, monkeypatch):
    """`from my_helpers_60b import squash` beside two references in two folders, loaded in one
    process (`kgen search a/ref.py b/ref.py`): each traces its own folder's squash (the second
    traced the first's, cached in sys.modules); the same folder's text run again gets the same
    module (its classes and functions the same objects)."""
    import sys

    from kgen.frontend.reference import Reference
    from kgen.frontend.trace import trace

    monkeypatch.delitem(sys.modules, "my_helpers_60b", raising=False)
    refs = {}
    for folder, op in (("a", "tanh"), ("b", "sigmoid")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "my_helpers_60b.py").write_text(f"import torch\n\ndef squash(x):\n    return torch.{op}(x) * 3\n")
        refs[op] = tmp_path / folder / "helper_user.py"
        refs[op].write_text(HELPER_USER.replace("my_helpers_60", "my_helpers_60b"))
    for op, ref in [*refs.items(), *refs.items()]:
        graph = trace(Reference(str(ref)))
        assert [n.op for n in graph.live() if n.kind == "pointwise"][-2:] == [op, "mul"], ref
    first, again = Reference(str(refs["sigmoid"])), Reference(str(refs["sigmoid"]))
    assert first.module.squash is again.module.squash
