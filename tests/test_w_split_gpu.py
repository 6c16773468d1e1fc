"""GPU tier of w's kept split (fp16x3 above FP16X3_W_IN_REGISTERS_MAX_ROWS rows: kernels/gemm_wgmma_f16x3.cuh). The split of w
into fp16 hi and lo is kept from call to call for each weight, and the split pass reads each row of
w, hashes it, and splits again only the rows whose hash changed. These tests check that a kept
split is used (a planted change in it shows in the output while w is unchanged), that every way
of changing w is seen (writes through `w.data`, which leave the version counter alone; a sign flip
of two elements; an optimizer's step; a new module in the old one's memory), bit for bit against a
split made afresh, on rows held in registers (K <= 8192) and streamed (K > 8192), in a point-wise
part's training forward and a staged part's, and that the full gate passes."""

import copy
from pathlib import Path

import pytest
import torch

from kgen.check.loading import EmittedFile
from kgen.check.validate import validate
from kgen.codegen import generator
from kgen.tune.search import Candidate
from kgen.tune.spec import Spec, Tile

from conftest import build_once

pytestmark = pytest.mark.gpu

HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
TILE = Tile(128, 128, 32, 16, 128, stages=3)
# name: (reference, in_features, out_features): a point-wise part with rows held in the split
# kernel's registers, and a staged part (BatchNorm) with rows longer than 8192 (streamed twice).
CASES = {
    "pointwise": (str(Path(__file__).parent / "refs" / "gemm_mul_leakyrelu.py"), 1024, 768),
    "staged": ("gemm_scale_bn", 8704, 256),
}
BATCHES = (300, 1024)   # above FP16X3_W_IN_REGISTERS_MAX_ROWS: w split by the pass (300: just above)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    if not HOPPER:
        return {}
    d = tmp_path_factory.mktemp("w_split")
    candidates = {}
    for name, (ref, k, n) in CASES.items():
        spec = Spec.of(ref, 1024, k, n, math="fp16x3", backend="wgmma", fusion=2, tile=TILE)
        candidates[name] = Candidate(spec, generator.write(spec, d / f"{name}.py"))
    build_once(tmp_path_factory, "w_split", list(candidates.values()), 8, 900, lambda line: None)
    return {name: EmittedFile(c.path) for name, c in candidates.items()}


def needs_hopper():
    if not HOPPER:
        pytest.skip("the fp16x3 GEMM is Hopper's (sm_90)")


def model_and_input(f, batch, seed=0):
    torch.manual_seed(seed)
    with torch.device("cuda"):
        model = f.ModelNew(*f.init_args()).cuda()
    (x,) = [t.cuda() for t in f.reference.inputs(batch)]
    return model, x


def fresh(model, x):
    """The forward with w split afresh: a copy of the model's (its weight a storage of its own, so
    a split of its own, made now). (Not by forgetting the kept splits: a CUDA graph may hold one.)"""
    with torch.no_grad():
        return copy.deepcopy(model)(x)


def kept_split(f, w):
    (split,) = f.module._kgen_kept_splits(w).values()
    return split


def records_floats(f, batch, w):
    """Where w's halves start in its kept split (the rows' records come first)."""
    return getattr(f.build(), "kgen_w_split_records_floats_0")(batch, *w.shape)


@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("name", list(CASES))
def test_a_kept_split_is_used_while_w_is_unchanged_and_redone_where_it_changed(files, name, batch):
    needs_hopper()
    f = files[name]
    model, x = model_and_input(f, batch)
    model.eval()
    w = model.gemm.weight
    N, K = w.shape
    with torch.no_grad():
        first = model(x)
        assert torch.equal(model(x), first)
        # Plant a change in row 3's kept hi: w is unchanged, so the pass leaves the row as it is and
        # the GEMM reads the planted halves (output column 3 moves, no other: eval's BatchNorm is
        # per column).
        split = kept_split(f, w)
        halves = 2 * records_floats(f, batch, w)
        split.view(torch.float16)[halves + 3 * K:halves + 4 * K] = 0
        planted = model(x)
        changed = (planted != first).any(dim=0).nonzero().flatten().tolist()
        assert changed == [3], changed
        # A write through w.data (its version stays) to rows 3 and 5: both split again.
        version = w._version
        w.data[3, 0] += 1.0
        w.data[5, K - 1] *= -1.0
        assert w._version == version
        after = model(x)
    assert torch.equal(after, fresh(model, x))
    assert not torch.equal(after, first)


@pytest.mark.parametrize("batch", [200, 1024])
@pytest.mark.parametrize("name", list(CASES))
def test_trusting_weight_versions_skips_ws_pass_until_its_version_moves(files, name, batch):
    """ModelNew.kgen_trust_weight_versions(): a write through w.data (its version stays) is not
    seen while w's version is unchanged (w's pass skipped: the output is the one before the
    write); an in-place write bumps the version and the next forward's bits are those of a split
    made afresh; trust withdrawn, the output is a fresh split's again (at 1024 rows the pass
    hashes w and sees a .data write; at 200 rows the GEMM splits w in its registers again). At 200
    rows, where the GEMM would split w in its registers, the kept split is read on trust too, from
    the second call at a version of w on (the first splits w in the registers: a version that
    moves before every call, as in training, never pays for a split made for one call)."""
    needs_hopper()
    f = files[name]
    model, x = model_and_input(f, batch)
    model.eval()
    w = model.gemm.weight
    try:
        f.ModelNew.kgen_trust_weight_versions()
        with torch.no_grad():
            model(x)
            first = model(x)
            assert torch.equal(model(x), first)
            w.data[5, 0] += 1.0
            assert torch.equal(model(x), first)   # (not seen on trust)
            w.add_(torch.zeros_like(w))   # (the same values, a new version: every row hashed)
            after = model(x)   # (at 200 rows: w in the registers, the .data write seen there too)
            assert torch.equal(after, fresh(model, x)) and not torch.equal(after, first)
            made = model(x)    # (at 200 rows: the split made, then read while the version holds)
            w.data[9, 2] += 1.0
            assert torch.equal(model(x), made)
            w.data[9, 2] -= 1.0
            w.data[7, 1] *= -1.0
            f.ModelNew.kgen_trust_weight_versions(False)
            assert torch.equal(model(x), fresh(model, x))
    finally:
        f.ModelNew.kgen_trust_weight_versions(False)


@pytest.mark.parametrize("name", list(CASES))
def test_changes_a_sum_of_terms_could_cancel_are_seen(files, name):
    """Two elements' signs flipped in one row, and two elements of one row swapped (their terms'
    sum is unchanged where the hash did not weigh columns): each split again."""
    needs_hopper()
    f = files[name]
    model, x = model_and_input(f, 1024)
    model.eval()
    w = model.gemm.weight
    with torch.no_grad():
        model(x)
        w.data[7, 1] *= -1.0
        w.data[7, 2] *= -1.0
        flipped = model(x)
        assert torch.equal(flipped, fresh(model, x))
        a, b = w.data[9, 10].item(), w.data[9, 11].item()
        assert a != b
        w.data[9, 10], w.data[9, 11] = b, a
        swapped = model(x)
        assert torch.equal(swapped, fresh(model, x))


@pytest.mark.parametrize("name", list(CASES))
def test_training_steps_and_a_new_module_see_their_own_weights(files, name):
    """Training forwards (gradients wanted: z kept) after an optimizer's steps, and a new module
    made where a dropped one's memory was: each forward's bits are those of a split made afresh."""
    needs_hopper()
    f = files[name]
    model, x = model_and_input(f, 1024)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        optimizer.zero_grad()
        out = model(x)
        out.square().mean().backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        stepped = model(x)
    assert torch.equal(stepped, fresh(model, x))
    del model, optimizer, out
    torch.cuda.synchronize()
    again, x2 = model_and_input(f, 1024, seed=1)
    again.eval()
    with torch.no_grad():
        seen = again(x2)
    assert torch.equal(seen, fresh(again, x2))


@pytest.mark.parametrize("name", list(CASES))
def test_the_gate_passes(files, name):
    needs_hopper()
    results = validate(files[name], tol=1e-4, batch=1024)
    assert all(r.passed for r in results), [r.line() for r in results if not r.passed]


@pytest.mark.parametrize("name", list(CASES))
def test_compiled_and_captured_forwards_see_their_weights(files, name):
    """torch.compile(fullgraph=True) gives eager's bits; a CUDA graph captured after a call (the
    split kept then) replays the check, and one captured where no split is kept (a capture keeps
    none: its buffer is the graph's, zeroed by each replay) splits afresh: both replay with w
    changed through w.data as a split made afresh does."""
    needs_hopper()
    f = files[name]
    model, x = model_and_input(f, 1024)
    model.eval()
    w = model.gemm.weight
    with torch.no_grad():
        expect = model(x)
        assert torch.equal(torch.compile(model, fullgraph=True)(x), expect)
    for kept in (True, False):
        if not kept:
            f.module._KGEN_W_SPLITS.pop(id(w.untyped_storage()))
        graph = torch.cuda.CUDAGraph()
        with torch.no_grad(), torch.cuda.graph(graph):
            out = model(x)
        assert bool(f.module._kgen_kept_splits(w)) == kept
        graph.replay()
        assert torch.equal(out, fresh(model, x))
        w.data[11, 3] += 0.5
        graph.replay()
        assert torch.equal(out, fresh(model, x)), kept
        del graph


@pytest.mark.parametrize("name", list(CASES))
def test_cuda_graph_trees_keep_no_split_in_their_pool(files, name):
    """torch.compile(mode="reduce-overhead") whose first call is the model's: CUDA graph trees warm
    up with the thread's allocations routed to their pool, where no split may be kept (their
    check of the pool would find it, or their next graph overwrite it). Warm-up, recording and
    replays give a split made afresh's bits, w changed through w.data between replays too."""
    needs_hopper()
    f = files[name]
    model, x = model_and_input(f, 1024)
    model.eval()
    compiled = torch.compile(model, mode="reduce-overhead", fullgraph=True)
    w = model.gemm.weight
    with torch.no_grad():
        for step in range(4):
            if step == 3:
                w.data[2, 7] *= -1.0
            out = compiled(x).clone()
            assert torch.equal(out, fresh(model, x)), step
