"""`kgen search --gpus`: the option, the choice of GPUs, and the scheduling of candidates over one
worker per GPU, with fake workers (CPU: no GPU and no build; a fake worker is a small script
speaking the worker's protocol)."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import click
import pytest
import torch
from click.testing import CliRunner

from kgen import cli
from kgen.tune import search
from kgen.tune.configs import WGMMA_TILES
from kgen.tune.search import Candidate, Evaluator, enumerate_specs, gpu_env
from kgen.tune.spec import FP32_ACCURATE_MATHS

from conftest import REFS_DIR as REFS

SPEC = enumerate_specs("gemm_scale_bn", 256, 512, 512, maths=("tf32x3",))[0]

# A fake `kgen.tune.worker evaluate -`: one KGEN_RESULT line per path read from stdin, saying
# which GPU it ran on (its CUDA_VISIBLE_DEVICES); a path with "crash" in it makes it report a
# runtime error and exit, as the real worker does; "hang" makes it hang. A JSON request (the
# search's runoff or full validation) is answered as the real worker answers it, with its pid;
# a file named "fail" fails its validation, "die" makes it exit on the request, "lost" answers
# (a failed validation) saying it exits, as the real worker does after losing its CUDA context.
FAKE_WORKER = textwrap.dedent('''
    import json, os, sys, time
    gpu = os.environ.get("CUDA_VISIBLE_DEVICES", "inherited")
    for line in sys.stdin:
        if line.startswith("{"):
            request = json.loads(line)
            files = request.get("runoff") or [request["validate"]]
            if any("die" in os.path.basename(f) for f in files):
                print("Traceback: an illegal memory access", flush=True)
                sys.exit(3)
            lost = any("lost" in os.path.basename(f) for f in files)
            if "runoff" in request:
                times = {"eager": [2.0] * len(files), "pid": os.getpid(), "worker_gpu": gpu,
                         "iters": request["iters"], "exiting": lost}
                times.update({f: [1.0 + k / 100] * request["rounds"] for k, f in enumerate(files)})
                print("KGEN_RUNOFF " + json.dumps(times), flush=True)
            else:
                failing = "fail" in os.path.basename(request["validate"]) or lost
                print(("FAIL" if failing else "PASS") + "  training, 20 steps", flush=True)
                print("KGEN_VALIDATED " + json.dumps({"passed": not failing, "pid": os.getpid(), "exiting": lost}),
                      flush=True)
            if lost:
                time.sleep(0.3)   # (exiting, but not at once: the search must not write to it meanwhile)
                sys.exit(3)
            continue
        path = line.strip()
        name = os.path.basename(path)
        time.sleep(0.05)
        if "hang" in name:
            time.sleep(60)
        if os.environ.get("FAKE_INCORRECT", "@") in name:   # (a name part the test plants: its validation fails)
            print("KGEN_RESULT " + json.dumps({"path": path, "status": "incorrect", "detail": "planted"}), flush=True)
            continue
        if "crash" in name:
            print("KGEN_RESULT " + json.dumps({"path": path, "status": "runtime_error", "detail": "boom"}), flush=True)
            sys.exit(3)
        ms = float(name.rsplit("_ms", 1)[1][:-3]) if "_ms" in name else 1.0
        print("KGEN_RESULT " + json.dumps({
            "path": path, "status": "passed", "passing_tols": [0.0001], "worker_gpu": gpu, "pid": os.getpid(),
            "measured": {"device": "Fake GPU", "date": "2026-11-23", "batch": 256, "tol": 0.0001,
                         "median_ms": ms, "p20_ms": ms, "p80_ms": ms, "eager_ms": 2.0, "eager_tf32_ms": 0.5,
                         "ratio": ms / 2.0, "max_abs_err": 1e-6, "max_rel_err": 1e-6, "error_ratio": 1.0}}),
              flush=True)
''')


def run(*args):
    return CliRunner().invoke(cli.main, list(args))


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5", ""])
def test_a_bad_gpus_option_is_a_usage_error_before_any_gpu_is_needed(tmp_path, monkeypatch, value):
    monkeypatch.chdir(tmp_path)
    r = run("search", "--gpus", value)
    assert r.exit_code == 2, r.output
    assert "--gpus" in r.output and "expected 'all' or a positive number of GPUs" in r.output
    assert "needs a CUDA GPU" not in r.output and "Traceback" not in r.output
    assert list(tmp_path.iterdir()) == []


def test_gpus_option_values():
    t = cli.GpuCount()
    assert t.convert("all", None, None) is None and t.convert("ALL", None, None) is None
    assert t.convert("2", None, None) == 2 and t.convert(3, None, None) == 3


def _visible(monkeypatch, names):
    monkeypatch.setattr(torch.cuda, "device_count", lambda: len(names))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=None: names[i or 0])


def test_the_search_uses_the_visible_gpus_or_the_first_n(monkeypatch):
    _visible(monkeypatch, ["NVIDIA H200"] * 2)
    assert cli.search_gpus(None) == [0, 1]
    assert cli.search_gpus(1) == [0]
    assert cli.search_gpus(2) == [0, 1]
    with pytest.raises(click.BadParameter, match="3 GPUs asked for, 2 visible"):
        cli.search_gpus(3)
    _visible(monkeypatch, ["NVIDIA H200", "NVIDIA H100 80GB HBM3"])
    assert cli.search_gpus(1) == [0]
    with pytest.raises(click.BadParameter, match="of one kind"):
        cli.search_gpus(None)


def test_too_many_gpus_is_a_usage_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    _visible(monkeypatch, ["NVIDIA H200"] * 2)
    r = run("search", "--gpus", "4", "--in", "64", "--out", "64")
    assert r.exit_code == 2 and "4 GPUs asked for, 2 visible" in r.output, r.output


def test_each_worker_sees_its_gpu_alone(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    # one GPU, device 0: the environment as it always was (the single-GPU search unchanged)
    assert gpu_env([0], 0) is None and gpu_env(None, 0) is None
    assert gpu_env([0, 1], 0)["CUDA_VISIBLE_DEVICES"] == "0"
    assert gpu_env([0, 1], 1)["CUDA_VISIBLE_DEVICES"] == "1"
    # the indices are this process's: mapped through its own CUDA_VISIBLE_DEVICES
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3, 5")
    assert gpu_env([0, 1], 1)["CUDA_VISIBLE_DEVICES"] == "5"
    assert gpu_env([0, 1], 0)["CUDA_VISIBLE_DEVICES"] == "3"


def _candidates(tmp_path, names):
    out = []
    for name in names:
        path = tmp_path / f"{name}.py"
        path.write_text("")
        out.append(Candidate(SPEC, path, status="built"))
    return out


def _evaluator(tmp_path, gpus, timeout=30.0, total=0):
    script = tmp_path / "fake_worker.py"
    script.write_text(FAKE_WORKER)
    results, lines = [], []
    ev = Evaluator([1e-4], None, 10, timeout, lines.append, results.append, total=total, gpus=gpus,
                   command=[sys.executable, str(script)])
    return ev, results, lines


def test_candidates_are_shared_by_one_worker_per_gpu(tmp_path, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    cands = _candidates(tmp_path, [f"c{i}" for i in range(12)])
    ev, results, lines = _evaluator(tmp_path, [0, 1], total=len(cands))
    for c in cands:
        ev.submit(c)
    ev.finish()
    assert sorted(id(c) for c in results) == sorted(id(c) for c in cands)
    assert all(c.status == "passed" for c in cands)
    # each record says which GPU measured it, and that is the GPU its worker saw alone
    assert all(c.record["worker_gpu"] == str(c.record["gpu"]) for c in cands)
    per_gpu = {g: [c for c in cands if c.record["gpu"] == g] for g in (0, 1)}
    assert per_gpu[0] and per_gpu[1], "both workers measured"
    # one warm worker process per GPU
    assert all(len({c.record["pid"] for c in cs}) == 1 for cs in per_gpu.values())
    assert any(" gpu 1 " in line for line in lines) and len(lines) == 12


def test_workers_start_before_the_first_candidate_is_built_when_candidates_will_come(tmp_path, monkeypatch):
    """A worker's start (torch, CUDA, the first evaluation's imports) overlaps the builds: with
    candidates to come each GPU's worker process starts with the Evaluator; a search that has
    nothing to measure (all cached) starts none."""
    import time

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    script = tmp_path / "fake_worker.py"
    script.write_text("import os, pathlib\n"
                      "pathlib.Path(os.environ['KGEN_TEST_STARTED'], str(os.getpid())).touch()\n" + FAKE_WORKER)
    for total, expected in ((2, 2), (0, 0)):
        started = tmp_path / f"started{total}"
        started.mkdir()
        monkeypatch.setenv("KGEN_TEST_STARTED", str(started))
        ev = Evaluator([1e-4], None, 10, 30.0, lambda line: None, lambda c: None, total=total, gpus=[0, 1],
                       command=[sys.executable, str(script)])
        deadline = time.monotonic() + 20
        while len(list(started.iterdir())) < expected and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        assert len(list(started.iterdir())) == expected   # before any candidate was submitted
        ev.finish()


def test_a_worker_that_dies_before_its_first_candidate_says_why_in_each(tmp_path, monkeypatch):
    """Started early, a worker can die in its warm-up (an import, CUDA) before a candidate is
    built: each candidate is then a runtime error carrying the worker's last words, as when the
    worker died on it, and the search goes on."""
    import time

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    script = tmp_path / "dying_worker.py"
    script.write_text("import sys\nprint('warm-up failed: no CUDA driver', flush=True)\nsys.exit(134)\n")
    cands = _candidates(tmp_path, ["a", "b"])
    done = []
    ev = Evaluator([1e-4], None, 10, 30.0, lambda line: None, done.append, total=len(cands), gpus=[0],
                   command=[sys.executable, str(script)])
    time.sleep(1.0)   # it has died by now
    for c in cands:
        ev.submit(c)
    ev.finish()
    assert len(done) == 2 and {c.status for c in cands} == {"runtime_error"}
    assert all("exited with 134" in c.detail and "no CUDA driver" in c.detail for c in cands)


def test_a_worker_that_got_no_candidate_is_not_waited_for(tmp_path, monkeypatch):
    """Every build failed: the worker started for them, still warming up (or hung there), is
    stopped rather than waited for."""
    import time

    script = tmp_path / "slow_worker.py"
    script.write_text("import time\ntime.sleep(60)\n")
    ev = Evaluator([1e-4], None, 10, 30.0, lambda line: None, lambda c: None, total=3, gpus=[0],
                   command=[sys.executable, str(script)])
    started = time.monotonic()
    ev.finish()
    assert time.monotonic() - started < 10


def test_a_crash_costs_its_candidate_only_and_the_worker_comes_back_on_its_gpu(tmp_path, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    cands = _candidates(tmp_path, ["a", "crash", "b", "c", "d", "e"])
    ev, results, _ = _evaluator(tmp_path, [0, 1])
    for c in cands:
        ev.submit(c)
    ev.finish()
    status = {c.path.stem: c.status for c in cands}
    assert status.pop("crash") == "runtime_error"
    assert set(status.values()) == {"passed"}
    assert {c.record["gpu"] for c in cands} <= {0, 1}
    assert all(c.record.get("worker_gpu") == str(c.record["gpu"]) for c in cands if c.status == "passed")


def test_a_hang_times_out_on_its_gpu_while_the_other_goes_on(tmp_path, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    cands = _candidates(tmp_path, ["hang"] + [f"c{i}" for i in range(6)])
    ev, results, _ = _evaluator(tmp_path, [0, 1], timeout=3.0)
    for c in cands:
        ev.submit(c)
    ev.finish()
    assert cands[0].status == "timeout"
    assert all(c.status == "passed" for c in cands[1:])
    hung_on = cands[0].record["gpu"]
    assert any(c.record["gpu"] != hung_on for c in cands[1:])


def test_the_runoff_and_the_full_validation_go_to_the_first_gpus_warm_worker(tmp_path, monkeypatch):
    """After the candidates (drained, the workers still up), the search's runoff and full
    validation are requests to the worker that measured on its first GPU: the same process, no
    fresh start; the answers are read as the subprocesses' were (times; passed and the checks'
    lines, failed_checks naming the failures)."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    cands = _candidates(tmp_path, [f"c{i}" for i in range(6)] + ["fail"])
    ev, results, _ = _evaluator(tmp_path, [0, 1], total=len(cands))
    for c in cands:
        ev.submit(c)
    ev.drain()
    assert len(results) == len(cands)
    home = ev.worker_on(0)
    pids_on_0 = {c.record["pid"] for c in cands if c.record["gpu"] == 0}
    times, error = search.run_runoff(cands[:2], 30, home)
    assert error == "" and times["worker_gpu"] == "0" and {times["pid"]} == pids_on_0
    assert times["iters"] == search.RUNOFF_ITERS and "exiting" not in times
    assert sorted(k for k in times if k.endswith(".py")) == sorted(str(c.path) for c in cands[:2])
    assert all(len(times[str(c.path)]) == search.RUNOFF_ROUNDS for c in cands[:2])
    ok, log = search.full_validation(cands[0].path, 1e-4, 30, home)
    assert ok and "PASS" in log
    ok, log = search.full_validation(cands[-1].path, 1e-4, 30, home)
    assert not ok and search.failed_checks(log) == ": FAIL  training, 20 steps"
    ev.finish()


def _warm_worker(tmp_path, monkeypatch, names):
    """Candidates named `names` and the one GPU's worker after it measured the first of them."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    cands = _candidates(tmp_path, names)
    ev, _, _ = _evaluator(tmp_path, [0], total=1)
    ev.submit(cands[0])
    ev.drain()
    return ev, cands, ev.worker_on(0)


def test_a_worker_that_dies_on_a_request_says_why_and_the_next_starts_another(tmp_path, monkeypatch):
    ev, cands, home = _warm_worker(tmp_path, monkeypatch, ["a", "die", "b"])
    first = cands[0].record["pid"]
    ok, log = search.full_validation(cands[1].path, 1e-4, 30, home)
    assert not ok and "illegal memory access" in log and "exited with 3" in log
    assert search.failed_checks(log) == (": the worker exited with 3 (its last line: Traceback: an illegal "
                                         "memory access)")
    times, error = search.run_runoff([cands[0], cands[2]], 30, home)
    assert error == "" and times["pid"] != first   # a fresh worker on the same GPU
    ev.finish()


def test_after_a_request_that_lost_the_cuda_context_the_next_goes_to_a_fresh_worker(tmp_path, monkeypatch):
    """A worker whose CUDA context a check lost answers, says it is exiting, and exits: the next
    request (the next-fastest candidate's validation) is not written to it but to a new worker,
    and passes."""
    ev, cands, home = _warm_worker(tmp_path, monkeypatch, ["a", "lost", "b"])
    ok, log = search.full_validation(cands[1].path, 1e-4, 30, home)
    assert not ok and "FAIL" in log
    ok, log = search.full_validation(cands[2].path, 1e-4, 30, home)
    assert ok, log
    ev.finish()


def test_a_worker_whose_answer_cannot_be_read_costs_its_candidate_only(tmp_path, monkeypatch):
    """A result line the search cannot read (the worker's output garbled) fails that candidate
    and restarts the worker; the search's wait for its candidates still ends."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    script = tmp_path / "garbled_worker.py"
    script.write_text("import sys\nfor line in sys.stdin:\n"
                      "    print('KGEN_RESULT {not json' if 'bad' in line else 'KGEN_RESULT ' + "
                      "'{\"status\": \"incorrect\", \"detail\": \"x\"}', flush=True)\n")
    cands = _candidates(tmp_path, ["bad", "good"])
    ev = Evaluator([1e-4], None, 10, 30.0, lambda line: None, lambda c: None, total=2, gpus=[0],
                   command=[sys.executable, str(script)])
    for c in cands:
        ev.submit(c)
    ev.drain()
    assert cands[0].status == "runtime_error" and "unreadable answer" in cands[0].detail
    assert cands[1].status == "incorrect"
    ev.finish()


def test_a_search_that_raises_kills_its_workers(tmp_path, monkeypatch):
    """An error after the candidates (or an interrupt) ends the search's workers at once, not
    after what they might still be doing."""
    fake_gpus(tmp_path, monkeypatch)
    made = []

    class Recorded(search.Evaluator):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            made.append(self)

    monkeypatch.setattr(search, "Evaluator", Recorded)

    def boom(candidates):
        raise RuntimeError("disk full")

    monkeypatch.setattr(search, "results_table", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        search.run_search("gemm_scale_bn", 256, 512, 512, [1e-4], maths=("tf32x3",), top=2,
                          work_dir=tmp_path / "work", out_dir=tmp_path / "out", results_dir=tmp_path / "results",
                          exhaustive=True, cache=search.MeasurementCache(tmp_path / "cache.json"),
                          echo=lambda s: None, gpus=[0])
    (ev,) = made
    assert all(w.proc is None or w.proc.poll() is not None for w in ev.workers)
    assert not any(w.thread.is_alive() for w in ev.workers)


def test_the_worker_owns_its_heap_before_validating(monkeypatch):
    """The search's worker is kgen's own process: validate() there freezes the heap around its
    checks whatever was frozen before (the GPU host's Python starts with objects frozen, and its
    count is back after each collection), so the worker claims the heap before each validation."""
    from kgen.check import loading, validate as validate_module
    from kgen.tune import worker

    seen = []

    class Loaded:   # (an EmittedFile that needs no GPU)
        def __init__(self, path):
            pass

        def build(self, dtype):
            pass

    def fake_validate(f, **kw):
        seen.append(kw.get("own_heap"))
        raise RuntimeError("seen")   # (what follows a validation is not this test's)

    monkeypatch.setattr(loading, "EmittedFile", Loaded)
    monkeypatch.setattr(validate_module, "validate", fake_validate)
    assert "seen" in worker.evaluate_one("a.py", [1e-4], None, 30)["detail"]
    with pytest.raises(RuntimeError, match="seen"):
        worker.full_validation("a.py", 1e-4, None)
    assert seen == [True, True]


def test_kgen_validate_owns_the_heap_as_a_command_only(tmp_path, monkeypatch):
    """`kgen validate` run as the command (cli.run: the console script, python -m kgen.cli) owns
    its process's heap; called in another's process (click's runner, here) it does not."""
    from kgen.check import validate as validate_module

    path = tmp_path / "f.py"
    r = run("generate", "--problem", "gemm_scale_bn", "--batch", "64", "--in", "64", "--out", "64", "-o", str(path))
    assert r.exit_code == 0, r.output
    seen = []
    monkeypatch.setattr(cli, "_require_cuda", lambda what: None)
    monkeypatch.setattr("kgen.check.loading.EmittedFile.build", lambda self, dtype=None: None)
    monkeypatch.setattr(validate_module, "validate", lambda f, **kw: seen.append(kw["own_heap"]) or [])
    assert CliRunner().invoke(cli.main, ["validate", str(path)]).exit_code == 0
    monkeypatch.setattr(sys, "argv", ["kgen", "validate", str(path)])
    with pytest.raises(SystemExit) as done:
        cli.run()
    assert done.value.code == 0
    assert seen == [False, True]


def test_the_worker_answers_the_searchs_requests(monkeypatch, capsys):
    """kgen.tune.worker's loop: JSON lines are the runoff and the full validation (their answers
    printed as the search reads them, each saying whether the worker exits after it), paths are
    candidates; a request that raises ends the worker with its traceback, as does one after
    which the CUDA context is lost (its answer says so first)."""
    import io

    from kgen.check import validate as validate_module
    from kgen.tune import worker

    done = []
    monkeypatch.setattr(worker, "warm_up", lambda: None)
    monkeypatch.setattr(worker, "runoff_times", lambda files, rounds, iters, dtype:
                        done.append(("runoff", files, rounds, iters, dtype)) or {"eager": [1.0], files[0]: [0.5]})
    monkeypatch.setattr(worker, "full_validation",
                        lambda path, tol, batch, dtype: done.append(("validate", path, tol, batch, dtype)) or {"passed": True})
    monkeypatch.setattr(worker, "evaluate_one", lambda path, *a: {"path": path, "status": "passed"})
    monkeypatch.setattr(validate_module, "cuda_context_lost", lambda: False)
    requests = ["a.py", json.dumps({"runoff": ["a.py", "b.py"], "rounds": 5, "iters": 30}),
                json.dumps({"validate": "a.py", "tol": 1e-4, "batch": None}), "b.py"]
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n".join(requests) + "\n"))
    assert worker.main(["evaluate", "--tol", "1e-4", "--dtype", "bf16", "-"]) == 0
    assert done == [("runoff", ["a.py", "b.py"], 5, 30, "bf16"), ("validate", "a.py", 1e-4, None, "bf16")]
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out] == ["KGEN_RESULT", "KGEN_RUNOFF", "KGEN_VALIDATED", "KGEN_RESULT"]
    assert json.loads(out[1].split(" ", 1)[1]) == {"eager": [1.0], "a.py": [0.5], "exiting": False}
    assert json.loads(out[2].split(" ", 1)[1]) == {"passed": True, "exiting": False}

    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps({"walk": "a.py"}) + "\nb.py\n"))
    assert worker.main(["evaluate", "--tol", "1e-4", "-"]) == worker.EXIT_AFTER_RUNTIME_ERROR
    assert "unknown request" in capsys.readouterr().out

    monkeypatch.setattr(validate_module, "cuda_context_lost", lambda: True)
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps({"validate": "a.py", "tol": 1e-4}) + "\nb.py\n"))
    assert worker.main(["evaluate", "--tol", "1e-4", "-"]) == worker.EXIT_AFTER_RUNTIME_ERROR
    out = capsys.readouterr().out
    assert '"exiting": true' in out and "KGEN_RESULT" not in out   # b.py was not evaluated


def test_one_gpu_runs_one_worker_in_the_searchs_own_environment(tmp_path, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    cands = _candidates(tmp_path, ["a", "b", "c"])
    ev, _, lines = _evaluator(tmp_path, [0])
    for c in cands:
        ev.submit(c)
    ev.finish()
    assert {c.record["worker_gpu"] for c in cands} == {"inherited"}
    assert {c.record["gpu"] for c in cands} == {0}
    assert not any(" gpu " in line for line in lines)


def fake_gpus(tmp_path, monkeypatch) -> dict:
    """A search's builds and GPU subprocesses replaced by fakes on CPU (the worker: FAKE_WORKER);
    returns what the fakes were called with."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=None: "Fake GPU")

    class Props:
        multi_processor_count = 132

    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i=None: Props())
    script = tmp_path / "fake_worker.py"
    script.write_text(FAKE_WORKER)
    calls: dict = {"worker_commands": []}
    real_worker_command = search.worker_command

    def fake_worker_command(*a):
        calls["worker_commands"].append(real_worker_command(*a))
        return [sys.executable, str(script)]

    monkeypatch.setattr(search, "worker_command", fake_worker_command)

    def fake_build_all(cands, jobs, timeout, echo, on_built=lambda c: None, dtype="fp32"):
        calls["built"] = [c.spec for c in cands]
        calls["build_dtype"] = dtype
        for i, c in enumerate(cands):
            # every candidate within the runoff's margin: 1.00, 1.01, ... ms
            c.path = c.path.rename(c.path.with_name(f"{c.path.stem}_ms{1 + i / 100:.2f}.py"))
            c.status = "built"
            on_built(c)

    def fake_runoff(contenders, timeout, worker):
        calls["runoff"] = worker
        return {"eager": [2.0] * 10, **{str(c.path): [1.0 + 0.001 * k] * 5 for k, c in enumerate(contenders)}}, ""

    def fake_validation(path, tol, timeout, worker, batch=None):
        calls["validation"] = worker
        return True, "ok"

    monkeypatch.setattr(search, "build_all", fake_build_all)
    monkeypatch.setattr(search, "run_runoff", fake_runoff)
    monkeypatch.setattr(search, "full_validation", fake_validation)
    return calls


def test_the_record_says_which_gpu_measured_what(tmp_path, monkeypatch):
    """A whole search on two fake GPUs: builds and the GPU subprocesses replaced by fakes. Every
    candidate's record names the GPU that measured it; the runoff and the full validation run on
    the first GPU, and the record and the winner say so."""
    calls = fake_gpus(tmp_path, monkeypatch)
    record = search.run_search("gemm_scale_bn", 256, 512, 512, [1e-4], maths=("tf32x3",), top=3,
                               work_dir=tmp_path / "work", out_dir=tmp_path / "out",
                               results_dir=tmp_path / "results", exhaustive=True,
                               cache=search.MeasurementCache(tmp_path / "cache.json"), echo=lambda s: None,
                               gpus=[0, 1])
    saved = json.loads(open(record["record_path"]).read())
    assert saved["gpus"] == [{"index": 0, "host_gpu": "0", "name": "Fake GPU"},
                             {"index": 1, "host_gpu": "1", "name": "Fake GPU"}]
    assert saved["runoff_and_validation_gpu"] == 0
    measured = [c for c in saved["candidates"] if c["status"] == "passed"]
    assert len(measured) >= 3 and {c["gpu"] for c in measured} == {0, 1}
    assert all(c["worker_gpu"] == str(c["gpu"]) for c in measured)
    winner = saved["winners"]["0.0001"]
    assert winner["runoff_gpu"] == 0 and winner["full_validation_gpu"] == 0
    assert winner["measured_on_gpu"] in (0, 1)
    # the runoff and the validation ran on GPU 0 alone, by the worker that measured there, for the
    # module in fp32 (its command's)
    assert calls["runoff"] is calls["validation"] and calls["runoff"].gpu == 0
    assert calls["runoff"].env["CUDA_VISIBLE_DEVICES"] == "0"
    assert all("--dtype" not in cmd for cmd in calls["worker_commands"])
    assert calls["build_dtype"] == "fp32"


def test_a_search_in_bf16_tries_each_16_bit_build_once_and_says_its_dtype(tmp_path, monkeypatch):
    """kgen search --dtype bf16 (fakes for the GPU): only variants with a 16-bit build (kgen's
    Hopper GEMM), one per distinct one (BM, group, fusion: its GEMM ignores the math mode and
    the tile's BN), the fp32-exact math kept; the worker, the runoff and the full validation run
    the module in bf16; the record, the winner's file name and the index say bf16, and
    `kgen generate` does not take it for an fp32-accurate file."""
    from kgen.codegen import generator
    from kgen.tune.choose import earlier_winner

    calls = fake_gpus(tmp_path, monkeypatch)
    times = {"dtype": "bf16", "kgen_ms": 0.3, "eager_ms": 0.33, "compile_ms": 0.36, "max_autotune_ms": 0.3}

    def fake_compare(path, timeout, env=None, dtype="fp32"):
        calls["compare"] = (path, dtype)
        return times, ""

    monkeypatch.setattr(search, "compare_with_compile", fake_compare)
    lines = []
    record = search.run_search("gemm_scale_bn", 256, 512, 512, [1e-4], work_dir=tmp_path / "work",
                               out_dir=tmp_path / "out", results_dir=tmp_path / "results",
                               cache=search.MeasurementCache(tmp_path / "cache.json"), echo=lines.append,
                               gpus=[0], dtype="bf16", vs_compile=True)
    built = calls["built"]
    assert built and all(generator.half_gemm_type(s) is not None for s in built)
    builds = [(s.tile.bm, s.tile.group_m, s.fusion) for s in built]
    assert len(set(builds)) == len(builds) and {s.math for s in built} == {"tf32x3"}
    assert all(cmd[-3:] == ["--dtype", "bf16", "-"] for cmd in calls["worker_commands"])
    # the builds are the bf16 ones, in the parallel build (not one at a time in the GPU worker)
    assert calls["build_dtype"] == "bf16"
    # (the runoff and the validation by that worker, which runs the module in bf16)
    assert calls["runoff"] is calls["validation"] and calls["runoff"].owner.gpus == [0]
    saved = json.loads(open(record["record_path"]).read())
    assert saved["dtype"] == "bf16" and record["record_path"].endswith("_tol0.0001_bf16.json")
    winner = saved["winners"]["0.0001"]
    assert winner["path"].endswith("_tol0.0001_bf16.py")
    index = json.loads((tmp_path / "out" / "index.json").read_text())
    assert [w["dtype"] for w in index["winners"].values()] == ["bf16"]
    assert earlier_winner("gemm_scale_bn", 256, 512, 512, "sm_90a", results_dir=tmp_path / "results") is None
    found = earlier_winner("gemm_scale_bn", 256, 512, 512, "sm_90a", results_dir=tmp_path / "results", dtype="bf16")
    assert found is not None and found[0].name() == winner["name"]
    # --vs-compile: the winner against torch.compile in bf16, in the record and the output
    assert calls["compare"] == (tmp_path / "out" / Path(winner["path"]).name, "bf16")
    assert winner["vs_compile"] == times
    assert any("torch.compile 0.360 ms (0.833x), max-autotune 0.300 ms (1.000x)" in line for line in lines)
    # the names are the fp32 builds'; the output says what each runs in bf16
    said = next(line for line in lines if "every GEMM candidate runs kgen's 16-bit GEMM" in line)
    assert all(f"{s.name()} -> BM {s.tile.bm}" in said for s in built)
    # the same search in fp32 keeps to its own cache entries and files
    assert search.MeasurementCache.key(built[0], "Fake GPU", "eval") != \
        search.MeasurementCache.key(built[0], "Fake GPU", "eval", "bf16")


def test_the_compare_worker_prints_the_winner_eager_and_torch_compile(monkeypatch, capsys):
    """python -m kgen.tune.worker compare --dtype bf16 FILE (bench faked: no GPU here): builds the
    file's bf16 library, benches with both torch.compile modes in bf16, prints one KGEN_COMPARE line."""
    from kgen.check import bench as bench_module
    from kgen.check import loading
    from kgen.check.bench import BenchResult, Timing
    from kgen.tune import worker

    seen = {}

    class FakeFile:
        def __init__(self, path):
            seen["path"] = path

        def build(self, dtype=None):
            seen["built"] = dtype

    def fake_bench(f, iters, dtype, with_compile, with_autotune):
        seen["bench"] = (dtype, with_compile, with_autotune)
        t = lambda ms: Timing(ms, ms, ms)  # noqa: E731
        return BenchResult("Fake GPU", 8, t(0.3), t(0.33), t(0.33), 0.0, 0.0, compiled=t(0.36),
                           dtype="bfloat16", autotuned=t(0.3))

    monkeypatch.setattr(loading, "EmittedFile", FakeFile)
    monkeypatch.setattr(bench_module, "bench", fake_bench)
    assert worker.main(["compare", "--dtype", "bf16", "winner.py"]) == 0
    assert seen == {"path": "winner.py", "built": torch.bfloat16, "bench": (torch.bfloat16, True, True)}
    line = capsys.readouterr().out.strip()
    assert line.startswith(worker.COMPARE_PREFIX)
    assert json.loads(line[len(worker.COMPARE_PREFIX):]) == {
        "dtype": "bf16", "kgen_ms": 0.3, "eager_ms": 0.33, "compile_ms": 0.36, "max_autotune_ms": 0.3}


def test_a_worker_subprocess_that_fails_says_why():
    """The runoff's and --vs-compile's subprocess (search._worker_json): no result line, the
    worker's last line as the reason, and a timeout said as one."""
    times, error = search._worker_json(["nosuch"], search.RUNOFF_PREFIX, 60, None)
    assert times is None and "invalid choice: 'nosuch'" in error
    times, error = search._worker_json(["evaluate", "--tol", "1e-4", "-"], search.RESULT_PREFIX, 1e-3, None)
    assert times is None and error == "took longer than 0 s"


def test_generate_takes_a_bf16_references_winner_of_a_search_in_bf16(tmp_path, monkeypatch):
    """A module written in bf16 (its Linear and its get_inputs()): `kgen search` searches it in
    bf16 by default, and `kgen generate` then takes that winner (fakes for the GPU)."""
    from conftest import module_source
    from kgen.tune import choose

    ref = tmp_path / "bf16_module.py"
    ref.write_text(module_source("x = torch.relu(x) * 2.0", {}, 512, dtype="bfloat16"))
    calls = fake_gpus(tmp_path, monkeypatch)
    record = search.run_search(str(ref), 256, 512, 512, [1e-4], work_dir=tmp_path / "work",
                               out_dir=tmp_path / "out", results_dir=tmp_path / "results",
                               cache=search.MeasurementCache(tmp_path / "cache.json"), echo=lambda s: None,
                               gpus=[0], dtype=choose.module_dtype(str(ref)))
    # the search's worker (which validated the winner) runs the module in bf16
    assert calls["worker_commands"][-1][-3:] == ["--dtype", "bf16", "-"] and calls["validation"] and record["winners"]
    spec, why, measured = choose.fastest_known(str(ref), 256, 512, 512, choose.target("sm_90a"),
                                               tmp_path / "results")
    assert spec.name() == record["winners"]["0.0001"]["name"]
    assert why.startswith("the winner in bf16 of an earlier search") and "x eager bf16" in why


def _passed(path, tol: float, batch: int, ratio: float, eager_ms: float) -> dict:
    """A fake worker's record: `path` passed at `batch`, `ratio` times eager's `eager_ms`."""
    return {"path": str(path), "status": "passed", "passing_tols": [tol],
            "measured": {"batch": batch, "median_ms": eager_ms * ratio, "eager_ms": eager_ms, "ratio": ratio}}


def _also_batch_search(tmp_path, batches: tuple, echo) -> dict:
    """run_search on the shipped problem's tf32x3 tier (4 fastest) with --also-batch `batches`."""
    return search.run_search("gemm_scale_bn", 256, 512, 512, [1e-4], maths=("tf32x3",), top=4,
                             work_dir=tmp_path / "work", out_dir=tmp_path / "out",
                             results_dir=tmp_path / "results", exhaustive=True,
                             cache=search.MeasurementCache(tmp_path / "cache.json"), echo=echo,
                             gpus=[0], also_batches=batches)


def test_also_batch_picks_the_fastest_over_every_batch_and_validates_at_each(tmp_path, monkeypatch):
    """kgen search --also-batch 1024 (fakes for the GPU): the tier's fastest are measured at 1024
    too; the one fastest at the search's batch but slow at 1024 loses to one good at both, one
    that fails at 1024 is out, the winner is fully validated at both batches, and the record and
    the file's header carry its times at 1024."""
    calls = fake_gpus(tmp_path, monkeypatch)
    validations = []

    def fake_validation(path, tol, timeout, worker, batch=None):
        validations.append((Path(path).name, batch))
        return True, "ok"

    monkeypatch.setattr(search, "full_validation", fake_validation)
    at_1024 = {}

    def fake_measure(paths, tol, batch, iters, timeout, env=None, dtype="fp32"):
        calls.setdefault("measured_at", []).append((batch, [Path(p).name for p in paths], env))
        records = {}
        for rank, p in enumerate(paths):
            if rank == 2:
                records[str(p)] = {"path": str(p), "status": "incorrect", "detail": "allclose failed"}
                continue
            ratio = 0.9 if rank == 0 else 0.6   # the fastest at 256 is slow at 1024
            records[str(p)] = _passed(p, tol, batch, ratio, 8.0)
            at_1024[Path(p).name] = ratio
        return records, ""

    monkeypatch.setattr(search, "measure_at_batch", fake_measure)
    lines = []
    record = _also_batch_search(tmp_path, (1024,), lines.append)
    (batch, measured_names, _), = calls["measured_at"]
    assert batch == 1024 and len(measured_names) == search.ACROSS_BATCHES_TOP
    fastest, second, failing = measured_names
    winner = record["winners"]["0.0001"]
    assert Path(winner["path"]).name and winner["name"] == Path(second).stem.rsplit("_ms", 1)[0]
    assert winner["measured"]["at_batches"] == {"1024": {"batch": 1024, "median_ms": 4.8, "eager_ms": 8.0, "ratio": 0.6}}
    # the winner fully validated at 1024 and at the search's own batch; nothing validated the loser
    assert (second, 1024) in validations and (second, None) in validations
    assert not any(name == fastest for name, _ in validations)
    assert any(f"fails at batch 1024 (incorrect: allclose failed); it is out" in line for line in lines)
    header = (tmp_path / "out" / Path(winner["path"]).name).read_text()
    assert "at batch 1024: 4.800 ms; eager fp32 8.000 ms -> 0.600x" in header
    saved = json.loads(open(record["record_path"]).read())
    by_name = {c["name"]: c for c in saved["candidates"]}
    assert by_name[winner["name"]]["at_batches"]["1024"]["ratio"] == 0.6


def test_also_batch_is_checked_before_a_gpu_is_needed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = run("search", "--problem", "gemm_scale_bn", "--also-batch", "1")
    assert r.exit_code == 2 and "--also-batch" in r.output, r.output


def test_a_failed_full_validation_says_which_checks_failed():
    """The search's line for a candidate that failed its full validation names the failing checks
    (or the last line of a validation that ended another way)."""
    log = "PASS  eval mode\nFAIL  training, 20 steps   max abs 1.0e-02\nFAIL  gradients, train mode   x\n18 passed, 2 failed\n"
    assert search.failed_checks(log) == ": FAIL  training, 20 steps   max abs 1.0e-02; FAIL  gradients, train mode   x"
    assert search.failed_checks("Traceback (most recent call last):\nRuntimeError: boom\n") == ": RuntimeError: boom"
    assert search.failed_checks("") == ""


def test_measure_at_batch_runs_the_searchs_worker_command_on_its_files(tmp_path, monkeypatch):
    """--also-batch's measurement is the search's own worker command (here the fake worker, its
    paths on stdin) at that batch, one record per file; a file the worker never answers for is
    named."""
    calls = fake_gpus(tmp_path, monkeypatch)
    paths = [tmp_path / "a_ms1.20.py", tmp_path / "b_ms0.80.py"]
    records, error = search.measure_at_batch(paths, 1e-4, 128, 30, 60, dtype="bf16")
    assert error == "" and sorted(records) == sorted(map(str, paths))
    assert records[str(paths[1])]["measured"]["median_ms"] == 0.8
    assert calls["worker_commands"][-1][-5:] == ["--batch", "128", "--dtype", "bf16", "-"]
    monkeypatch.setattr(search, "worker_command", lambda *a: [sys.executable, "-c", "pass"])
    records, error = search.measure_at_batch(paths, 1e-4, 128, 30, 60)
    assert records == {} and str(paths[0]) in error


def test_also_batch_times_an_outlier_again_and_keeps_the_faster(tmp_path, monkeypatch):
    """A contender whose ratio to eager at a batch is more than RETIME_FACTOR times the best there
    is timed once more (alone), keeps the lower ratio, and the search says so; one whose second
    time is as slow stays slow."""
    fake_gpus(tmp_path, monkeypatch)
    monkeypatch.setattr(search, "full_validation", lambda path, tol, timeout, worker, batch=None: (True, "ok"))
    calls = []

    def fake_measure(paths, tol, batch, iters, timeout, env=None, dtype="fp32"):
        names = [Path(p).name for p in paths]
        calls.append(names)
        records = {}
        for rank, p in enumerate(paths):
            if len(calls) == 1:
                ratio = [0.3, 0.9, 1.2][rank]    # the second and third 3x / 4x the first
            else:
                ratio = {0: 0.35, 1: 1.5}[rank]   # timed again: the second was disturbed, the third not
            records[str(p)] = _passed(p, tol, batch, ratio, 10.0)
        return records, ""

    monkeypatch.setattr(search, "measure_at_batch", fake_measure)
    lines = []
    record = _also_batch_search(tmp_path, (7,), lines.append)
    first, again = calls
    assert again == first[1:]
    retimed = [line for line in lines if "the lower ratio kept" in line]
    assert len(retimed) == 2 and "9.000 ms" in retimed[0] and "3.500 ms" in retimed[0]
    saved = json.loads(open(record["record_path"]).read())
    at_7 = {c["name"]: c["at_batches"]["7"]["median_ms"] for c in saved["candidates"] if c.get("at_batches")}
    assert sorted(at_7.values()) == [3.0, 3.5, 12.0]


# ---- several files on several GPUs: one search per GPU (tune.several) ------------------------
# A fake `kgen search FILE ... --gpus N --jobs J --summary-json S`: sleeps (a search's time),
# writes a record naming the GPUs it saw and the options it got, and the summary; a file with
# "crash" in its name dies before its summary, "nowin" ends with no winner.
FAKE_SEARCH = textwrap.dedent('''
    import json, os, sys, time
    ref, args = sys.argv[1], sys.argv[2:]
    opt = lambda name: args[args.index(name) + 1]
    print("searching", os.path.basename(ref), flush=True)
    start = time.time()
    time.sleep(0.4)
    if "crash" in ref:
        print("Traceback (most recent call last): boom", flush=True)
        sys.exit(3)
    record = {"problem": ref, "tols": [1e-4], "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
              "gpus_option": opt("--gpus"), "jobs": opt("--jobs"), "args": args, "pid": os.getpid(),
              "start": start, "end": time.time(),
              "winners": {} if "nowin" in ref else {"0.0001": {"measured": {"median_ms": 1.0, "ratio": 0.4}}}}
    path = os.path.join(os.path.dirname(opt("--summary-json")), "record.json")
    open(path, "w").write(json.dumps(record))
    open(opt("--summary-json"), "w").write(json.dumps([{"ref": ref, "record_path": path, "wall_s": 0.4}]))
    sys.exit(0 if record["winners"] else 1)
''')


def test_gpu_groups_one_gpu_per_search_or_a_share_of_them():
    from kgen.tune.several import gpu_groups

    assert gpu_groups([0, 1], 36) == [[0], [1]]
    assert gpu_groups([0, 1, 2, 3], 2) == [[0, 1], [2, 3]]
    assert gpu_groups([0, 1, 2], 2) == [[0, 1], [2]]
    assert gpu_groups([0, 1], 1) == [[0, 1]]
    assert gpu_groups([0], 5) == [[0]]


def test_several_files_run_one_search_per_gpu_at_once(tmp_path, monkeypatch):
    """search_files with a fake search: every file searched once, each search seeing its GPU alone
    (mapped through the host's CUDA_VISIBLE_DEVICES) with its share of the builds; both GPUs
    busy at once (the wall time well under the searches' sum); each line tagged with its GPU;
    a search that dies costs its file only (no record, its exit code kept)."""
    from kgen.tune.several import search_files

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6")
    script = tmp_path / "fake_search.py"
    script.write_text(FAKE_SEARCH)
    refs = [str(tmp_path / f"{name}.py") for name in ("a", "b", "crash", "c", "nowin", "d")]
    lines = []
    results, wall = search_files(refs, [0, 1], ["--tol", "0.0001"], 8, echo=lines.append,
                                 command=[sys.executable, str(script)])
    assert [r.ref for r in results] == refs
    by_name = {Path(r.ref).stem: r for r in results}
    crashed = by_name.pop("crash")
    assert crashed.record is None and crashed.exit_code == 3
    assert by_name["nowin"].exit_code == 1 and by_name["nowin"].record["winners"] == {}
    for r in by_name.values():
        assert r.record["cuda_visible_devices"] == r.group[0] and r.group[0] in ("4", "6")
        assert r.record["gpus_option"] == "1" and r.record["jobs"] == "8"
        assert r.record["args"][:2] == ["--tol", "0.0001"]
    assert {r.group[0] for r in results} == {"4", "6"}, "both GPUs searched files"
    # the searches ran at once: one on each GPU while one on the other ran (not a wall-time
    # ratio, which a loaded machine's process starts would blur)
    ran = [r.record for r in results if r.record]
    assert any(a["cuda_visible_devices"] != b["cuda_visible_devices"] and a["start"] < b["end"] and b["start"] < a["end"]
               for a in ran for b in ran), "the searches ran at once"
    assert wall < sum(r.wall_s for r in results)
    assert any(line.startswith("[gpu 6] searching ") for line in lines)
    assert any("boom" in line and line.startswith("[gpu ") for line in lines)
    assert sum(line.startswith("=== [") for line in lines) == len(refs)
    assert any(line.startswith("--- [3/6] crash.py") and "no record, exit 3" in line for line in lines)


def test_search_of_several_files_on_two_gpus_through_the_cli(tmp_path, monkeypatch):
    """kgen search A.py B.py --gpus 2 (search_files faked): the options reach each file's search,
    the builds are shared between the two searches at a time, and the table says which GPU
    searched each file; the exit code is 1 where a file got no winner."""
    from kgen.tune import several
    from kgen.tune.several import FileSearch

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli, "_require_cuda", lambda what: None)
    monkeypatch.setattr(cli, "search_gpus", lambda count: [0, 1])
    seen = {}

    def fake_search_files(refs, gpus, args, jobs, echo):
        seen.update(refs=refs, gpus=gpus, args=args, jobs=jobs)
        won = {"winners": {"0.0001": {"measured": {"median_ms": 1.25, "ratio": 0.45}}}, "tols": [1e-4]}
        return [FileSearch(refs[0], ["0"], 0, 50.0, won), FileSearch(refs[1], ["1"], 3, 20.0, None)], 52.0

    monkeypatch.setattr(several, "search_files", fake_search_files)
    refs = [str(REFS / "gemm_mul_leakyrelu.py"), str(REFS / "gemm_swish_scale.py")]
    r = run("search", *refs, "--tol", "1e-4", "--jobs", "16", "--top", "2", "--out-dir", "o")
    assert r.exit_code == 1, r.output
    assert seen["refs"] == refs and seen["gpus"] == [0, 1] and seen["jobs"] == 8
    assert seen["args"] == ["--tol", "0.0001", "--iters", "30", "--out-dir", "o", "--results-dir", "results",
                            "--top", "2"]
    table = r.output[r.output.index("file "):]
    leaky = next(line for line in table.splitlines() if line.startswith("gemm_mul_leakyrelu.py"))
    assert "1.250" in leaky and "0.450" in leaky and leaky.split()[-1] == "0"
    swish = next(line for line in table.splitlines() if line.startswith("gemm_swish_scale.py"))
    assert "no record" in swish and swish.split()[-1] == "1"
    assert "wall time 52.0 s on 2 GPUs; the searches' own wall times add up to 70.0 s" in r.output
    assert "1 searches ended without a record" in r.output and "gemm_swish_scale.py" in r.output


def test_the_measurement_cache_keeps_every_searchs_entries(tmp_path):
    """Searches at once (one per GPU) share the measurement cache: each save merges with what the
    others saved, under a lock, so no search's entries are lost."""
    path = tmp_path / "cache" / "measurements.json"
    writer = textwrap.dedent(f'''
        import sys
        from kgen.tune.search import MeasurementCache
        c = MeasurementCache(__import__("pathlib").Path({str(path)!r}))   # read once: stale at once
        for i in range(20):
            c.entries[f"{{sys.argv[1]}} {{i}}"] = i
            c.save()
    ''')
    env = dict(os.environ, KGEN_CACHE_DIR=str(tmp_path / "cache"))
    procs = [subprocess.Popen([sys.executable, "-c", writer, name], env=env) for name in ("a", "b", "c")]
    assert [p.wait() for p in procs] == [0, 0, 0]
    entries = json.loads(path.read_text())
    assert sorted(entries) == sorted(f"{n} {i}" for n in "abc" for i in range(20))
    assert sorted(f.name for f in path.parent.iterdir()) == ["locks", "measurements.json"]


def test_a_rerun_measures_nothing_the_runoff_included(tmp_path, monkeypatch):
    """A search run again with its measurements cached builds nothing (so starts no worker) and takes
    the runoff's times from the cache too (the README's main job, rerun), choosing the same
    winner; a different set of contenders is timed afresh."""
    calls = fake_gpus(tmp_path, monkeypatch)
    cache_path = tmp_path / "cache.json"

    def once(lines):
        return search.run_search("gemm_scale_bn", 256, 512, 512, [1e-4], maths=("tf32x3",), top=3,
                                 work_dir=tmp_path / "work", out_dir=tmp_path / "out",
                                 results_dir=tmp_path / "results", exhaustive=True,
                                 cache=search.MeasurementCache(cache_path), echo=lines.append, gpus=[0])

    first_lines, again_lines = [], []
    first = once(first_lines)
    assert "runoff" in calls and calls["built"]
    del calls["runoff"], calls["built"]
    again = once(again_lines)
    assert "runoff" not in calls and calls["built"] == []   # nothing built; so no worker started
    assert again["winners"]["0.0001"]["name"] == first["winners"]["0.0001"]["name"]
    assert again["winners"]["0.0001"]["measured"]["runoff_ms"] == first["winners"]["0.0001"]["measured"]["runoff_ms"]
    assert any("in an earlier run on this device, cached" in line for line in again_lines)
    assert not any("cached" in line and "timed again" in line for line in first_lines)
    # another set of contenders (a tile dropped from the search): timed again, not taken from the cache
    cache = search.MeasurementCache(cache_path)
    contenders = [search.Candidate(s, tmp_path / f"{s.name()}.py") for s in
                  search.enumerate_specs("gemm_scale_bn", 256, 512, 512, maths=("tf32x3",))[:2]]
    assert cache.runoff(contenders, "Fake GPU") is None


def test_the_build_worker_runs_the_file_without_tracing_its_reference(tmp_path, monkeypatch):
    """python -m kgen.tune.worker build: the emitted file is read, checked and run, and its build
    asked for in the dtype given; its reference is never loaded (tracing it cost a fresh build
    process 7 of its 21 s on an H100 host)."""
    from kgen.check.loading import EmittedFile
    from kgen.tune import worker
    from kgen.tune.spec import Spec

    path = tmp_path / "f.py"
    r = run("generate", "--problem", "gemm_scale_bn", "--batch", "64", "--in", "64", "--out", "64", "-o", str(path))
    assert r.exit_code == 0, r.output

    def traced(self):
        raise AssertionError("the build worker loaded the reference")

    monkeypatch.setattr(Spec, "reference", traced)
    seen = []
    monkeypatch.setattr(EmittedFile, "build", lambda self, dtype=None, autocast=False, fp32_weight=False: seen.append((self.spec.name(), dtype)))
    assert worker.main(["build", "--dtype", "bf16", str(path)]) == 0
    assert seen == [(EmittedFile(path, with_reference=False).spec.name(), torch.bfloat16)]
    with pytest.raises(AssertionError, match="loaded the reference"):
        EmittedFile(path)   # the checks' way loads it


def test_a_worker_ends_without_the_interpreters_teardown():
    """A search waits for its worker's end before it reports (the teardown of torch and the CUDA
    context took ~1 s of the main job on the H100 host): python -m kgen.tune.worker ends at once
    after its last line, output flushed, exit code kept, no exit handler run."""
    from kgen.tune.worker import EXIT_AFTER_RUNTIME_ERROR, RESULT_PREFIX

    wrapper = ("import atexit, runpy, sys; atexit.register(print, 'TEARDOWN', flush=True); "
               "sys.argv = ['worker', 'evaluate', '--tol', '1e-4', '-']; "
               "runpy.run_module('kgen.tune.worker', run_name='__main__')")
    env = {k: v for k, v in os.environ.items() if k != "KGEN_WORKER_TEARDOWN"}
    # (a file that is not there: its record printed, then the worker's exit after a runtime error)
    done = subprocess.run([sys.executable, "-c", wrapper], input="no-such-file.py\n", capture_output=True,
                          text=True, timeout=120, env=env)
    assert done.returncode == EXIT_AFTER_RUNTIME_ERROR, done.stderr
    assert RESULT_PREFIX in done.stdout and "runtime_error" in done.stdout
    assert "TEARDOWN" not in done.stdout
    # KGEN_WORKER_TEARDOWN=1 (a profiler's run) keeps the teardown, and the exit code.
    kept = subprocess.run([sys.executable, "-c", wrapper], input="no-such-file.py\n", capture_output=True,
                          text=True, timeout=120, env=dict(env, KGEN_WORKER_TEARDOWN="1"))
    assert kept.returncode == EXIT_AFTER_RUNTIME_ERROR and "TEARDOWN" in kept.stdout


def test_a_search_that_cannot_start_costs_its_file_only(tmp_path):
    """A file whose search cannot even start (here: no such command) is a file without a record
    in the results, never a file left out of them (which the table and the exit code would
    count as searched)."""
    from kgen.tune.several import search_files

    refs = [str(tmp_path / f"{name}.py") for name in ("a", "b", "c")]
    lines = []
    results, _ = search_files(refs, [0, 1], [], 2, echo=lines.append, command=[str(tmp_path / "no-such-command")])
    assert [r.ref for r in results] == refs
    assert all(r.record is None for r in results)
    assert sum("did not run: FileNotFoundError" in line for line in lines) == len(refs)


# A parent searching with FAKE_SLOW_SEARCH (each search writes its pid, then sleeps): interrupted,
# it must end its searches rather than leave them running on their GPUs.
SEARCH_AND_WAIT = textwrap.dedent('''
    import sys
    from kgen.tune.several import search_files
    fake, pids = sys.argv[1], sys.argv[2]
    search_files([pids + "/a.py", pids + "/b.py", pids + "/c.py"], [0, 1], [], 1, echo=lambda line: print(line, flush=True),
                 command=[sys.executable, fake])
''')
FAKE_SLOW_SEARCH = textwrap.dedent('''
    import os, signal, sys, time
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # as a search busy in a build might be slow to
    open(os.path.splitext(sys.argv[1])[0] + ".pid", "w").write(str(os.getpid()))
    print("searching", flush=True)
    time.sleep(60)
''')


@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_an_interrupted_search_of_several_files_leaves_no_search_running(tmp_path, how):
    """Ctrl-C, a scheduler's cancel (SIGTERM) or a closed terminal (SIGHUP) to the parent alone."""
    import signal
    import time

    fake = tmp_path / "fake.py"
    fake.write_text(FAKE_SLOW_SEARCH)
    # SIGINT as a terminal's Ctrl-C finds it: a shell's background job (`pytest ... &`) inherits
    # SIGINT ignored, and Python then keeps it ignored (the search would rightly not stop).
    parent = subprocess.Popen([sys.executable, "-c", SEARCH_AND_WAIT, str(fake), str(tmp_path)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 30
    while len(list(tmp_path.glob("*.pid"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    pids = [int(p.read_text()) for p in tmp_path.glob("*.pid")]
    assert len(pids) == 2, parent.stdout.read() if parent.poll() is not None else "no searches started"
    parent.send_signal(getattr(signal, how))   # the parent alone, as `kill` would
    try:
        parent.wait(timeout=30)
    finally:
        parent.kill()
    assert parent.returncode != 0
    alive = []
    for pid in pids:
        try:
            os.kill(pid, 0)
            alive.append(pid)
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert alive == [], "searches left running after the parent was interrupted"
    assert not (tmp_path / "c.pid").exists(), "no search started after the interrupt"


def test_a_cache_saving_never_puts_back_what_another_search_replaced(tmp_path, monkeypatch):
    """Each search read the whole cache when it started; its saves write what it changed, not its
    stale copy of every other entry: a search that re-measured a candidate (more iterations,
    another tolerance) keeps its newer entry when another search saves after it."""
    monkeypatch.setenv("KGEN_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "cache" / "measurements.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"eval of B's candidate": {"iters": 30}}))
    a, b = search.MeasurementCache(path), search.MeasurementCache(path)
    b.entries["eval of B's candidate"] = {"iters": 100}
    b.save()
    a.entries["eval of A's candidate"] = {"iters": 30}
    a.save()
    assert json.loads(path.read_text()) == {"eval of B's candidate": {"iters": 100},
                                            "eval of A's candidate": {"iters": 30}}
    assert a.entries == json.loads(path.read_text())   # and the saver sees the others' entries now
    # an entry changed in place is a change too
    a.entries["eval of A's candidate"]["iters"] = 60
    a.save()
    assert json.loads(path.read_text())["eval of A's candidate"] == {"iters": 60}


def test_two_files_of_one_name_are_never_searched_at_once(tmp_path, monkeypatch):
    """a/model.py and b/model.py (or one file given twice) name their work folder, record and
    winner alike: search_files runs them one after the other, the other GPU taking the next
    file meanwhile; every file is searched once."""
    from kgen.tune.several import search_files

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    script = tmp_path / "fake_search.py"
    script.write_text(FAKE_SEARCH)
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
    refs = [str(tmp_path / "a" / "model.py"), str(tmp_path / "b" / "model.py"), str(tmp_path / "c.py"),
            str(tmp_path / "c.py")]
    results, _ = search_files(refs, [0, 1], [], 4, echo=lambda line: None, command=[sys.executable, str(script)])
    assert [r.ref for r in results] == refs and all(r.record for r in results)
    by_name: dict = {}
    for r in results:
        by_name.setdefault(Path(r.ref).name, []).append(r.record)
    for name, records in by_name.items():
        (a, b), = [records]
        assert a["end"] <= b["start"] or b["end"] <= a["start"], f"two {name} searched at once"


def test_the_several_files_module_imports_no_torch():
    """kgen.tune.several runs no torch (its searches are subprocesses): importing it stays
    light, which the interrupted-parent tests above rely on for their time."""
    code = "import sys, kgen.tune.several; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stdout + out.stderr


def _search_with_a_fallback(tmp_path, monkeypatch, lines, validation=None, also_batches=(), on_contender=None,
                            tols=(1e-4,)):
    """The default search (the cost model on, the probe faked: no reduced-precision math meets
    1e-4) of a shape where fp16x3 is predicted fastest and tf32x3's best is kept as its fallback;
    `validation` in place of the fake full validation that passes every file."""
    calls = fake_gpus(tmp_path, monkeypatch)
    if validation:
        monkeypatch.setattr(search, "full_validation", validation)

    def fake_probe(problem, batch, i, o, maths, tols, device, constants=(), eager=None):
        eager["within"] = list(tols)
        return {m: ([], "rounding alone is too far") for m in maths if m not in FP32_ACCURATE_MATHS}

    monkeypatch.setattr(search, "probe_maths", fake_probe)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    record = search.run_search("gemm_scale_bn", 1024, 8192, 8192, list(tols), work_dir=tmp_path / "work",
                               out_dir=tmp_path / "out", results_dir=tmp_path / "results",
                               cache=search.MeasurementCache(tmp_path / "cache.json"), echo=lines.append,
                               also_batches=also_batches, on_contender=on_contender)
    return calls, record


def test_the_fallback_is_built_but_measured_only_where_nothing_else_passes(tmp_path, monkeypatch):
    lines = []
    calls, record = _search_with_a_fallback(tmp_path, monkeypatch, lines)
    built = {s.name() for s in calls["built"]}
    by_status = {}
    for c in record["candidates"]:
        by_status.setdefault(c["status"], []).append(c["name"])
    assert by_status.get("reserve"), (by_status, lines)
    assert all("tf32x3" in n for n in by_status["reserve"])
    assert set(by_status["reserve"]) <= built
    assert all("fp16x3" in n for n in by_status["passed"])
    assert "fp16x3" in record["winners"]["0.0001"]["name"]
    assert not any("measuring the fallback" in line for line in lines)
    assert any("more kept as the fallback" in line for line in lines)


def test_where_nothing_measured_first_passes_the_fallback_is_measured_and_wins(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_INCORRECT", "fp16x3")
    lines = []
    _, record = _search_with_a_fallback(tmp_path, monkeypatch, lines)
    statuses = {c["name"]: c["status"] for c in record["candidates"] if c["status"] != "pruned"}
    assert {s for n, s in statuses.items() if "fp16x3" in n} == {"incorrect"}
    assert "reserve" not in statuses.values()
    assert "tf32x3" in record["winners"]["0.0001"]["name"]
    assert any("measuring the fallback" in line for line in lines)


def test_where_the_full_validations_fail_the_fallback_is_measured_and_validated(tmp_path, monkeypatch):
    validated = []

    def fake_validation(path, tol, timeout, worker, batch=None):
        validated.append(Path(path).name)
        return "fp16x3" not in Path(path).name, "FAIL  training, 20 steps"

    lines, guesses = [], []
    _, record = _search_with_a_fallback(tmp_path, monkeypatch, lines, fake_validation, on_contender=guesses.append)
    # each full validation announced first, with the record as it would be if that one won
    assert [g["winners"]["0.0001"]["name"] + ".py" for g in guesses] == [
        n.split("_ms")[0] + ".py" if "_ms" in n else n for n in validated]
    assert all(g["record_path"] == record["record_path"] for g in guesses)
    fp16 = [n for n in validated if "fp16x3" in n]
    # each tried once (one per tile of the search's list at this shape), none again after the
    # fallback came in
    assert len(fp16) == len(set(fp16)) == len(WGMMA_TILES["fp16x3"])
    assert "tf32x3" in validated[-1] and "tf32x3" in record["winners"]["0.0001"]["name"]
    assert any("measuring the fallback" in line for line in lines)


def test_a_rerun_builds_no_fallback_it_does_not_need(tmp_path, monkeypatch):
    """Every other candidate's measurement cached: nothing is built (a build of a cached
    extension costs a Python process seconds), the fallback stays a reserve, the winner stands."""
    lines = []
    _search_with_a_fallback(tmp_path, monkeypatch, lines)
    calls, record = _search_with_a_fallback(tmp_path, monkeypatch, lines)
    assert calls.get("built", []) == []   # (what fake_build_all was given)
    assert any(c["status"] == "reserve" for c in record["candidates"])
    assert "fp16x3" in record["winners"]["0.0001"]["name"]


def test_a_rerun_whose_candidates_now_fail_builds_and_measures_the_fallback(tmp_path, monkeypatch):
    """A rerun (every measurement cached but the full validations'), in which each candidate
    fails its full validation: the fallback, not built in the rerun until then, is built,
    measured and validated, and wins."""
    lines = []
    _search_with_a_fallback(tmp_path, monkeypatch, lines)
    cache = json.loads((tmp_path / "cache.json").read_text())
    (tmp_path / "cache.json").write_text(json.dumps({k: v for k, v in cache.items() if not k.startswith("full tol")}))
    validated = []

    def fake_validation(path, tol, timeout, worker, batch=None):
        validated.append(Path(path).name)
        return "fp16x3" not in Path(path).name, "FAIL  training, 20 steps"

    calls, record = _search_with_a_fallback(tmp_path, monkeypatch, lines, fake_validation)
    assert [s.math for s in calls["built"]] == ["tf32x3"]
    assert "tf32x3" in validated[-1] and "tf32x3" in record["winners"]["0.0001"]["name"]


def test_a_search_for_other_batches_too_measures_the_fallback(tmp_path, monkeypatch):
    """--also-batch: the model's ranking at the search's batch says little about the others
    (at 128 rows tf32x3 beats fp16x3 on the H100), so the fallback is measured with the rest."""
    monkeypatch.setattr(search, "rank_across_batches", lambda passing, *a: passing)
    lines = []
    _, record = _search_with_a_fallback(tmp_path, monkeypatch, lines, also_batches=(128,))
    statuses = {c["name"]: c["status"] for c in record["candidates"] if c["status"] != "pruned"}
    assert "reserve" not in statuses.values()
    assert any("tf32x3" in n and s == "passed" for n, s in statuses.items())


def test_the_fallback_is_measured_once_whatever_the_tiers(tmp_path, monkeypatch):
    """Two tiers, neither passed by what was measured first: the fallback is measured for the
    first and not again for the second (the fake passes 1e-4 alone: the second has no winner)."""
    monkeypatch.setenv("FAKE_INCORRECT", "fp16x3")
    lines = []
    _, record = _search_with_a_fallback(tmp_path, monkeypatch, lines, tols=(1e-4, 1e-2))
    assert sum("measuring the fallback" in line for line in lines) == 1
    assert sum("eval  [" in line and "tf32x3" in line for line in lines) == 1
    assert "tf32x3" in record["winners"]["0.0001"]["name"] and "0.01" not in record["winners"]


@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp16"])
def test_build_all_builds_each_file_for_the_dtype(tmp_path, monkeypatch, dtype):
    """search.build_all runs the worker's build of each file for a module in `dtype` (fp32: the
    worker's default, unsaid), in parallel, and reports each candidate as built."""
    commands = []

    def fake_run(cmd, **kwargs):
        commands.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(search.subprocess, "run", fake_run)
    cands = [Candidate(SPEC, tmp_path / f"f{i}.py") for i in range(3)]
    seen = []
    search.build_all(cands, 2, 60, lambda line: None, on_built=seen.append, dtype=dtype)
    assert sorted(map(id, seen)) == sorted(map(id, cands)) and all(c.status == "built" for c in cands)
    expected = [] if dtype == "fp32" else ["--dtype", dtype]
    assert sorted(cmd[3:] for cmd in commands) == sorted(["build", *expected, str(c.path)] for c in cands)
