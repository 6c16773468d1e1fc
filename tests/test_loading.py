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
