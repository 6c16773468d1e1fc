"""Session 55's probe of the CLI as a careless user meets it (docs/experiments/s55/cli_probe.py):
what it found, kept fixed. CPU only."""

import ast
import os
import signal
from pathlib import Path

import pytest
from click.testing import CliRunner

from kgen.cli import main

GOOD = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.fc(x) * 2.0)

batch_size = 16
in_features = 64
out_features = 32

def get_inputs():
    return [torch.randn(batch_size, in_features)]

def get_init_inputs():
    return [in_features, out_features]
'''


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def reference(tmp_path, name="ref.py", text=GOOD) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("where, text, said", [
    ("at import", GOOD + "\nimport sys\nsys.exit(0)\n", "sys.exit(0)"),
    ("at import, a status", GOOD + "\nimport sys\nsys.exit(3)\n", "sys.exit(3)"),
    ("in get_inputs", GOOD.replace("    return [torch.randn", "    import sys; sys.exit()\n    return [torch.randn"),
     "get_inputs() / get_init_inputs() raised SystemExit: sys.exit()"),
    ("in __init__", GOOD.replace("super().__init__()", "super().__init__(); import sys; sys.exit(5)"),
     "Model(*get_init_inputs()) raised SystemExit: sys.exit(5)"),
    ("in forward", GOOD.replace("return torch.relu", "import sys; sys.exit(4); return torch.relu"),
     "SystemExit: sys.exit(4)"),
])
def test_a_reference_that_exits_is_refused_not_kgens_own_exit(tmp_path, where, text, said):
    """sys.exit() in the reference ended kgen with the file's status and no word (sys.exit(0): a
    'success' that wrote nothing)."""
    out = tmp_path / "out.py"
    r = run("generate", reference(tmp_path, text=text), "-o", out)
    assert r.exit_code == 2, (where, r.exit_code, r.output)
    assert said in r.output and "ref.py" in r.output, r.output
    assert not out.exists()


def test_a_syntax_error_names_the_file_not_unknown(tmp_path):
    r = run("generate", reference(tmp_path, text=GOOD + "\ndef broken(:\n"), "-o", tmp_path / "out.py")
    assert r.exit_code == 2, r.output
    assert "<unknown>" not in r.output and "(ref.py, line 22)" in r.output, r.output


def test_a_reference_whose_name_does_not_end_in_py_is_read_as_the_file_it_is(tmp_path):
    """REF without `.py` and without a slash (`model.txt`) was taken for a shipped problem's name,
    and its refusal crashed (UnboundLocalError) before it could be said."""
    ref = reference(tmp_path, "model.txt")
    out = tmp_path / "out.py"
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        r = run("generate", "model.txt", "-o", out)
    finally:
        os.chdir(cwd)
    assert r.exit_code == 0, r.output
    assert "Traceback" not in r.output and r.exception is None or isinstance(r.exception, SystemExit)
    text = out.read_text()
    ast.parse(text)
    assert str(ref.resolve()) in text


@pytest.mark.parametrize("force", [(), ("--force",)])
def test_the_output_is_never_the_reference_itself(tmp_path, force):
    """-o REF said 'exists and differs ...; pass --force to replace it', and --force (through a
    link to the reference too) replaced the reference with its ModelNew file."""
    ref = reference(tmp_path)
    link = tmp_path / "link.py"
    link.symlink_to(ref)
    for out in (ref, link):
        r = run("generate", ref, "-o", out, *force)
        assert r.exit_code == 2 and "is the reference file itself" in r.output, r.output
        assert "--force" not in r.output
        assert ref.read_text() == GOOD


def test_what_is_not_a_regular_file_is_never_replaced(tmp_path):
    """-o /dev/null (a careless user's dry run) said 'pass --force to replace it', and --force
    replaced the device with a regular file (as root); a pipe here stands for it."""
    fifo = tmp_path / "pipe.py"
    os.mkfifo(fifo)

    def hung(*_):   # (kgen read the pipe to compare it with its file, and waited for ever)
        raise TimeoutError("kgen hung on the pipe")

    before = signal.signal(signal.SIGALRM, hung)
    try:
        for force in ((), ("--force",)):
            signal.alarm(20)
            r = run("generate", reference(tmp_path), "-o", fifo, *force)
            signal.alarm(0)
            assert r.exit_code == 2 and "not a regular file" in r.output, (r.output, r.exception)
            assert fifo.is_fifo()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe.py", "ref.py"]


def test_a_file_where_a_folder_belongs_is_the_users_request_refused(tmp_path):
    """-o FILE/x.py said 'cannot write FILE/x.py: File exists' (mkdir's words) and exited 1, the
    machine's failure; README: a file in the way exits 2."""
    ref = reference(tmp_path)
    r = run("generate", ref, "-o", tmp_path / "ref.py" / "deeper" / "x.py")
    assert r.exit_code == 2 and f"{ref} is a file, not a folder" in r.output, r.output


def test_an_interrupted_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    """Ctrl-C between the temporary file's write and its rename left `.NAME.*.tmp` behind (only an
    OSError was cleaned up)."""
    from kgen.codegen import generator

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    for force in ((), ("--force",)):
        monkeypatch.setattr(generator.os, "link", interrupted)
        monkeypatch.setattr(generator.os, "replace", interrupted)
        out = tmp_path / "out" / "m.py"
        r = run("generate", reference(tmp_path), "-o", out, *force)
        assert isinstance(r.exception, (KeyboardInterrupt, SystemExit)) and r.exit_code != 0, r.output
        assert not out.exists() and list(out.parent.iterdir()) == [], list(out.parent.iterdir())


def test_no_clobber_holds_against_a_file_that_appears_during_the_write(tmp_path, monkeypatch):
    """Two `kgen generate` of different variants into one new path at once: each saw no file,
    each renamed its own over it, both said `wrote`, and one's file was silently lost. Without
    --force the file is linked into place, which fails where one appeared meanwhile."""
    from kgen.codegen import generator

    out = tmp_path / "m.py"
    real_mkstemp = generator.tempfile.mkstemp

    def another_kgen_wins(*a, **k):   # the other process's file lands between check and write
        out.write_text("# the other kgen's file\n")
        return real_mkstemp(*a, **k)

    monkeypatch.setattr(generator.tempfile, "mkstemp", another_kgen_wins)
    r = run("generate", reference(tmp_path), "-o", out)
    assert r.exit_code == 2 and "exists and differs" in r.output, r.output
    assert out.read_text() == "# the other kgen's file\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.py", "ref.py"]


def corrupt_records(folder: Path) -> Path:
    folder.mkdir()
    (folder / "search_cut.json").write_text('{"candidates": [1, 2,')
    (folder / "search_list.json").write_text("[1, 2, 3]")
    (folder / "search_winners_int.json").write_text('{"winners": 5, "candidates": []}')
    (folder / "search_winner_str.json").write_text('{"winners": {"0.0001": "fast"}, "candidates": []}')
    (folder / "search_tol_word.json").write_text('{"winners": {"tight": {}}, "candidates": []}')
    (folder / "search_candidates_dict.json").write_text('{"winners": {}, "candidates": {"a": 1}}')
    (folder / "search_bytes.json").write_bytes(b"\xff\xfe\x00garbage")
    return folder


@pytest.mark.parametrize("command", [("winners",), ("winners", "--json"), ("list",)])
def test_records_that_are_not_records_are_skipped_and_named(tmp_path, command):
    """A results/ file that is not what a search writes (cut short, edited by hand) crashed
    `kgen winners` with AttributeError; every file is now named as skipped, and why."""
    folder = corrupt_records(tmp_path / "results")
    r = run(*command, "--results-dir", folder)
    assert r.exit_code == 0, (r.output, r.exception)
    for path in folder.iterdir():
        assert f"skipped {path}: not a search record" in r.output, (path, r.output)


def test_generate_beside_records_that_are_not_records_takes_the_rule(tmp_path):
    """The same files crashed `kgen generate` with a traceback while it looked for an earlier
    search's winner."""
    folder = corrupt_records(tmp_path / "results")
    out = tmp_path / "out.py"
    r = run("generate", reference(tmp_path), "-o", out, "--results-dir", folder)
    assert r.exit_code == 0, (r.output, r.exception)
    assert "no earlier search" in r.output and out.exists()


@pytest.mark.parametrize("command", ["validate", "bench"])
@pytest.mark.parametrize("problem, said", [
    (GOOD.replace("torch.relu(self.fc(x) * 2.0)", "torch.cumsum(self.fc(x), 1)"), "torch.cumsum is not supported"),
    (GOOD + "\nraise RuntimeError('boom')\n", "raised RuntimeError when executed: boom"),
])
def test_a_reference_kgen_cannot_use_is_refused_alike_by_every_command(tmp_path, command, problem, said):
    """`validate/bench FILE --ref REF` of a module kgen cannot synthesize (or a reference that
    raises) exited 1 as a failed check would; generate refuses the same module with exit 2."""
    out = tmp_path / "out.py"
    assert run("generate", reference(tmp_path), "-o", out).exit_code == 0
    other = reference(tmp_path, "other.py", problem)
    assert run("generate", other, "-o", tmp_path / "x.py").exit_code == 2
    r = run(command, out, "--ref", other)
    assert r.exit_code == 2 and said in r.output and "Traceback" not in r.output, r.output


@pytest.mark.parametrize("given", ["out", "model.txt", "out.py.bak"])
def test_an_output_that_is_no_python_file_is_refused(tmp_path, given):
    """`-o out` (a folder meant) wrote a file named `out`; a file without .py is no module the
    README's loader (importlib's spec_from_file_location) can load."""
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        r = run("generate", reference(tmp_path), "-o", given)
    finally:
        os.chdir(cwd)
    assert r.exit_code == 2 and "name a .py file, or a folder as" in r.output, r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ref.py"]


@pytest.mark.parametrize("name", ["my model.py", "-dash.py", "plain.py"])
def test_generate_says_the_next_step_with_a_path_to_paste(tmp_path, name):
    """Success said `wrote PATH (...)` and no more: what to do with the file was the README's to
    say; the command it gives now can be pasted as it is (a space, a leading dash)."""
    import shlex

    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        r = run("generate", reference(tmp_path), "-o", name)
        assert r.exit_code == 0, r.output
        line = next(l for l in r.output.splitlines() if l.startswith("next, on a GPU: kgen validate "))
        words = shlex.split(line.split(": ", 1)[1].split(";")[0])
        assert words[:2] == ["kgen", "validate"] and Path(words[2]).resolve() == (tmp_path / name).resolve()
        assert not words[2].startswith("-")
    finally:
        os.chdir(cwd)


def test_generate_for_a_dtype_says_it_in_the_commands_to_paste(tmp_path):
    """`kgen generate REF --dtype bf16` by the rule records no measurement, so `kgen validate FILE`
    ran the module in its inputs' dtype, fp32: the bf16 file was checked and timed as fp32 (session
    62's call A). The commands it says to run now carry --dtype where that default differs."""
    import shlex

    for dtype, said in (("bf16", ["--dtype", "bf16"]), ("fp32", [])):
        out = tmp_path / f"{dtype}.py"
        r = run("generate", reference(tmp_path), "--dtype", dtype, "-o", str(out))
        assert r.exit_code == 0, r.output
        line = next(l for l in r.output.splitlines() if l.startswith("next, on a GPU: kgen validate "))
        validate, bench = (shlex.split(c.split("kgen ", 1)[1].rsplit(" checks", 1)[0].rsplit(" times", 1)[0])
                           for c in line.split(": ", 1)[1].split(";"))
        assert validate[2:] == said and bench[2:] == said, line


def test_searchs_help_states_its_real_tolerance_default():
    """`kgen search --help` said [1e-4] for --tol; a bf16 / fp16 module's default is 1e-2."""
    r = run("search", "--help")
    text = " ".join(r.output.split())
    assert "one winner each [1e-4]" not in text and "0.0001 fp32, 0.01 bf16, 0.01 fp16" in text, text


def test_an_interrupted_search_starts_no_more_builds(monkeypatch):
    """Ctrl-C while a search built its candidates: `with ThreadPoolExecutor` waited for every
    queued build (each a process of nvcc, not interrupted: it started after the Ctrl-C), minutes
    before the search stopped."""
    import threading
    import time
    import types

    from kgen.tune import search

    started = []
    lock = threading.Lock()

    def build(c, *args):
        with lock:
            started.append(c)
        time.sleep(0.05)
        c.status = "built"
        return c

    monkeypatch.setattr(search, "_build", build)

    def interrupted(c):
        raise KeyboardInterrupt

    candidates = [search.Candidate(spec=types.SimpleNamespace(name=lambda: "c"), path=Path("c.py")) for _ in range(40)]
    with pytest.raises(KeyboardInterrupt):
        search.build_all(candidates, jobs=2, timeout=10, echo=lambda line: None, on_built=interrupted)
    assert len(started) <= 4, len(started)


def test_ctrl_c_says_so_and_exits_130_not_a_failures_1(tmp_path):
    """Ctrl-C during generate printed click's `Aborted!` and exited 1, the status README gives a
    failed validation or build: a script could not tell the user's interrupt from a failure.
    (`python -m kgen`, as here, is the console script's run now, not click's main alone.)"""
    import subprocess
    import sys

    ref = reference(tmp_path, text=GOOD + "\nimport time\nprint('READY', flush=True)\ntime.sleep(120)\n")
    out = tmp_path / "out.py"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    proc = subprocess.Popen([sys.executable, "-m", "kgen", "generate", str(ref), "-o", str(out)], cwd=tmp_path,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout.readline().strip() == "READY"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, (proc.returncode, err)
    assert "kgen: interrupted" in err and "Traceback" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ref.py"]



@pytest.mark.parametrize("option, value", [("--tile", "garbage"), ("--warp", "64"), ("--thread", "8")])
def test_a_malformed_tile_names_its_option_as_clicks_own_errors_do(tmp_path, option, value):
    """`--tile garbage` said `Invalid value: expected ...`, where every other bad value says
    `Invalid value for '--batch': ...`."""
    extra = ("--math", "fp32_simt") if option == "--thread" else ()
    r = run("generate", reference(tmp_path), "-o", tmp_path / "o.py", option, value, *extra)
    assert r.exit_code == 2 and (f"Invalid value for {option}:" in r.output   # (as --set's)
                                 or f"Invalid value for '{option}':" in r.output), r.output
