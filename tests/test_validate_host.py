"""kgen.check.validate's driver without a GPU: the checks are stand-ins, so these test what
validate() and the search's worker do with the checks' results (stopping, reporting), not the
checks themselves (the GPU tier does)."""
import pytest

from kgen.check import validate as v
from kgen.check.validate import NOT_RUN_AFTER_FAILURE, CheckResult


@pytest.fixture
def three_checks(monkeypatch):
    """A passing, a failing and a passing check; `ran` lists the ones validate() ran."""
    ran = []

    def check(name, passed):
        def run():
            ran.append(name)
            return CheckResult(name, passed, detail="" if passed else "off by a mile")
        return name, run

    monkeypatch.setattr(v, "dtype_refusal", lambda f, dtype: None)
    monkeypatch.setattr(v, "checks", lambda f, tol, quick, batch, device, dtype: [
        check("first", True), check("second", False), check("third", True)])

    class File:
        class spec:
            batch = 8
    return File(), ran


def test_validate_runs_every_check_by_default(three_checks):
    f, ran = three_checks
    results = v.validate(f, tol=1e-4, quick=True)
    assert ran == ["first", "second", "third"]
    assert [r.passed for r in results] == [True, False, True]
    assert v.summary(results) == "2 passed, 1 failed"


def test_the_checks_run_with_the_heap_frozen_and_their_own_garbage_collected(three_checks, monkeypatch):
    """validate() keeps the objects alive before it out of each check's collection (a full one
    over torch's heap costs ~0.1 s) and thaws them after; a check's cyclic garbage is still
    collected. A process that froze objects of its own (as this test session has: conftest) is
    left as it was: nothing more frozen, nothing thawed."""
    import gc
    import weakref

    f, ran = three_checks

    class Cycle:
        pass

    seen = {}

    def check_with_garbage():
        seen["frozen"] = gc.get_freeze_count()
        cycle = Cycle()
        cycle.self = cycle
        seen["cycle"] = weakref.ref(cycle)
        return CheckResult("garbage", True)

    def check_after():
        seen["collected"] = seen["cycle"]() is None
        return CheckResult("after", True)

    monkeypatch.setattr(v, "checks", lambda f, tol, quick, batch, device, dtype: [
        ("garbage", check_with_garbage), ("after", check_after)])
    frozen_by_the_session = gc.get_freeze_count()
    gc.unfreeze()
    try:
        assert [r.passed for r in v.validate(f, tol=1e-4, quick=True)] == [True, True]
        assert seen["frozen"] > 0 and seen["collected"]
        assert gc.get_freeze_count() == 0
        gc.freeze()   # a process that froze its own
        before = gc.get_freeze_count()
        kept = [Cycle() for _ in range(1000)]   # alive at validate's start: not frozen by it
        v.validate(f, tol=1e-4, quick=True)
        assert before // 2 < gc.get_freeze_count() <= before and seen["collected"]
        # A process of kgen's own: the heap frozen around the checks whatever was frozen
        # before (the GPU host's Python starts with objects frozen), all of it thawed after.
        v.validate(f, tol=1e-4, quick=True, own_heap=True)
        assert seen["frozen"] > before and seen["collected"]
        assert gc.get_freeze_count() == 0
        del kept
    finally:
        gc.freeze() if frozen_by_the_session else gc.unfreeze()


def test_stop_at_failure_skips_the_checks_after_the_first_failure(three_checks):
    f, ran = three_checks
    results = v.validate(f, tol=1e-4, quick=True, stop_at_failure=True)
    assert ran == ["first", "second"]
    assert [(r.name, r.passed, r.not_run) for r in results] == [
        ("first", True, False), ("second", False, False), ("third", False, True)]
    assert results[2].detail == NOT_RUN_AFTER_FAILURE
    assert v.summary(results) == f"1 passed, 1 failed, 1 {NOT_RUN_AFTER_FAILURE} (third)"


def test_the_search_worker_gives_up_a_tighter_tier_at_its_first_failure(monkeypatch):
    """A candidate that fails 1e-4 is judged at 1e-2 in full; its 1e-4 attempt stops early."""
    from kgen.check import bench, loading
    from kgen.tune import worker

    calls = []

    def fake_validate(f, tol, quick, batch, dtype, stop_at_failure=False, own_heap=False):
        calls.append((tol, stop_at_failure))
        return [CheckResult("numbers", tol >= 1e-2, max_abs=1e-3, max_rel=1e-3)]

    class File:
        def __init__(self, path):
            pass

        def build(self, dtype):
            pass

    class Bench:
        eager_tf32 = type("T", (), {"median_ms": 0.5})()

        def measured(self, tol):
            return {"median_ms": 1.0, "ratio": 0.5}

    monkeypatch.setattr(loading, "EmittedFile", File)
    monkeypatch.setattr(v, "validate", fake_validate)
    monkeypatch.setattr(bench, "bench", lambda f, batch, iters, dtype: Bench())
    record = worker.evaluate_one("x.py", [1e-4, 1e-2], None, 10)
    assert record["status"] == "passed" and record["passing_tols"] == [1e-2]
    assert calls == [(1e-4, True), (1e-2, False)]


def test_kernelbench_replay_leaves_out_a_jump_from_the_fp32_exact_ratio_only():
    """An element at a jump of the reference (a rounding's step) may land on the other side in any
    fp32 implementation: the fp32-exact ratio leaves it out (as the other forward checks do),
    while KernelBench's own allclose still judges every element."""
    import torch

    exact = torch.linspace(-1, 1, 1000, dtype=torch.float64)
    eager = (exact + 1e-7).float()
    new = eager.clone()
    new[10] += 1e-4   # a step of 1e-4 taken the other way: within allclose(1e-4), 100x eager's error
    jump = torch.zeros(1000, dtype=torch.bool)
    jump[10] = True
    judged = v.Comparison(1e-4, plain_allclose=True)
    judged.add("trial", new, eager, exact)
    assert not judged.ok and "fp32-exact gate" in judged.failures[0]
    left_out = v.Comparison(1e-4, plain_allclose=True)
    left_out.add("trial", new, eager, exact, left_out=jump)
    assert left_out.ok, left_out.failures
    new[20] += 1e-2   # beyond KernelBench's allclose: a failure whatever is left out
    jump[20] = True
    beyond = v.Comparison(1e-4, plain_allclose=True)
    beyond.add("trial", new, eager, exact, left_out=jump)
    assert not beyond.ok


def test_the_training_checks_steps_are_capped_where_a_gradient_grew():
    """validate.step_rates: a parameter's rate is kept while the fp64 run's gradient stays within
    TRAIN_STEP_CAP of its first, and scaled so that the step's largest move is TRAIN_STEP_CAP times
    the first's beyond; a parameter without a step keeps none."""
    rates = {"w": 0.5, "b": 2.0, "frozen": 0.0}
    first = {"w": 1.0, "b": 4.0, "frozen": 0.0}
    assert v.step_rates(rates, first, {"w": 1.5, "b": 0.5, "frozen": 0.0}) == rates
    now = {"w": 10.0, "b": 4.0 * v.TRAIN_STEP_CAP, "frozen": 3.0}
    capped = v.step_rates(rates, first, now)
    assert capped["w"] * now["w"] == pytest.approx(v.TRAIN_STEP_CAP * rates["w"] * first["w"])
    assert capped["b"] == rates["b"] and capped["frozen"] == 0.0
