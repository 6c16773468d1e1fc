"""Session 55: the CLI as a newcomer and a careless user meet it, on a host without a GPU.

Drives `python -m kgen.cli` in subprocesses over a table of cases (bad inputs, odd paths, output
places, invalid options, the GPU commands on a CPU host, corrupt records, SIGINT, two generates at
once) and writes one line per case: exit code, seconds, whether a traceback reached the user,
stdout / stderr's first and last lines, and the files left in the scratch folder.

    PYTHONPATH=<kgen checkout> python docs/experiments/s55/cli_probe.py [--kb DIR] [--only SUBSTR] [--json OUT]

--kb: KernelBench's level-2 folder (default /work/main/.kb/level2; its cases are skipped where absent).
Nothing here needs a GPU; the GPU commands are expected to refuse with exit 2.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PY = sys.executable
# The console script, as a user runs it (`python -m kgen.cli` puts the working directory first on
# sys.path, so a torch.py there shadows torch: Python's rule, probed once below).
KGEN = [str(Path(PY).parent / "kgen")] if (Path(PY).parent / "kgen").exists() else [PY, "-m", "kgen.cli"]

GOOD = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.fc(x) * 2.0)

batch_size = 64
in_features = 256
out_features = 128

def get_inputs():
    return [torch.randn(batch_size, in_features)]

def get_init_inputs():
    return [in_features, out_features]
'''


def variant(before: str = "", drop: str | None = None, after: str = "") -> str:
    """GOOD with a prefix / suffix and one top-level definition removed."""
    text = GOOD
    if drop:   # the definition up to the next top-level line
        start = text.index(drop)
        lines = text[start:].splitlines(keepends=True)
        end = next((i for i, l in enumerate(lines[1:], 1) if l.strip() and not l[0].isspace()), len(lines))
        text = text[:start] + "".join(lines[end:])
    return before + text + after


REFS = {
    "good.py": GOOD,
    "empty.py": "",
    "syntax.py": GOOD + "\ndef broken(:\n",
    "no_model.py": variant(drop="class Model"),
    "no_get_inputs.py": variant(drop="def get_inputs"),
    "no_init_inputs.py": variant(drop="def get_init_inputs"),
    "raises.py": variant(after="\nraise RuntimeError('boom at import')\n"),
    "exit0.py": variant(after="\nimport sys\nsys.exit(0)\n"),
    "exit3.py": variant(after="\nimport sys\nsys.exit(3)\n"),
    "prints.py": variant(before="print('HELLO FROM THE REFERENCE')\n"),
    "stdin.py": variant(after="\nanswer = input('continue? ')\n"),
    "sleeps.py": variant(after="\nimport time\ntime.sleep(3600)\n"),
    "random.py": GOOD, "torch.py": GOOD, "kgen.py": GOOD, "click.py": GOOD,
    "12_digits.py": GOOD,
    "with space.py": GOOD, "ünïcode.py": GOOD, "-dash.py": GOOD, "my-model.v2.py": GOOD,
    "not_python.txt": GOOD,
    "binary.py": None,   # bytes, written below
    "latin1.py": None,
    "get_inputs_raises.py": GOOD.replace("return [torch.randn(batch_size, in_features)]",
                                         "raise ValueError('no inputs today')"),
    "get_inputs_empty.py": GOOD.replace("return [torch.randn(batch_size, in_features)]", "return []"),
    "model_raises.py": GOOD.replace("super().__init__()", "super().__init__()\n        raise TypeError('bad init')"),
    "forward_raises.py": GOOD.replace("return torch.relu", "raise KeyError('forward'); return torch.relu"),
    "unsupported.py": GOOD.replace("torch.relu(self.fc(x) * 2.0)", "torch.cumsum(self.fc(x), 1)"),
    "no_gemm.py": GOOD.replace("torch.relu(self.fc(x) * 2.0)", "torch.relu(x)"),
}


def scratch_refs(root: Path) -> None:
    for name, text in REFS.items():
        if text is not None:
            (root / name).write_text(text, encoding="utf-8")
    (root / "binary.py").write_bytes(bytes(range(256)) * 4)
    (root / "latin1.py").write_bytes(("# caf\xe9\n" + GOOD).encode("latin-1"))
    (root / "adir").mkdir()
    os.symlink("good.py", root / "link.py")
    os.symlink("missing_target.py", root / "dangling.py")
    (root / "ro").mkdir()
    os.chmod(root / "ro", 0o555)


def run(argv, cwd, timeout=180, stdin=subprocess.DEVNULL, env=None):
    started = time.monotonic()
    try:
        p = subprocess.run(argv, cwd=cwd, stdin=stdin, capture_output=True, text=True, timeout=timeout,
                           env=env, errors="replace")
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc, out, err = "TIMEOUT", (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or ""), \
            (e.stderr or b"").decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
    return rc, time.monotonic() - started, out, err


def interrupt(argv, cwd, after_s: float, marker: str | None = None, timeout=120):
    """Runs argv and sends SIGINT `after_s` seconds after `marker` appears on its stdout/stderr
    (or after the start where None); the exit code, its output and how long it took to stop."""
    import threading

    p = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, errors="replace")
    started = time.monotonic()
    seen: list[str] = []
    reader = threading.Thread(target=lambda: seen.extend(iter(p.stdout.readline, "")), daemon=True)
    reader.start()
    while marker and marker not in "".join(seen) and p.poll() is None and time.monotonic() - started < timeout:
        time.sleep(0.05)
    time.sleep(after_s)
    sent = time.monotonic()
    p.send_signal(signal.SIGINT)
    try:
        p.wait(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        reader.join(5)
        return "HUNG", time.monotonic() - sent, "".join(seen), ""
    stopped = time.monotonic() - sent
    reader.join(5)
    return p.returncode, stopped, "".join(seen), ""


def cases(kb: Path | None):
    G = ["generate"]
    yield "help", ["--help"], {}
    for cmd in ("generate", "search", "validate", "bench", "list", "winners", "ops", "plot"):
        yield f"help {cmd}", [cmd, "--help"], {}
    yield "no command", [], {}
    yield "python -m kgen.cli beside a torch.py", ["-m", "kgen.cli", "--help"], {"exe": PY}
    yield "unknown command", ["generat"], {}
    # references
    for name in ("good.py", "missing.py", "adir", "empty.py", "syntax.py", "not_python.txt", "binary.py",
                 "latin1.py", "no_model.py", "no_get_inputs.py", "no_init_inputs.py", "raises.py", "exit0.py",
                 "exit3.py", "prints.py", "get_inputs_raises.py", "get_inputs_empty.py", "model_raises.py",
                 "forward_raises.py", "unsupported.py", "no_gemm.py", "random.py", "torch.py", "kgen.py",
                 "click.py", "12_digits.py", "with space.py", "ünïcode.py", "my-model.v2.py", "link.py",
                 "dangling.py"):
        yield f"generate {name}", G + [name, "-o", f"out/{name}.gen.py"], {}
    yield "generate -dash.py", G + ["-dash.py"], {}
    yield "generate -- -dash.py", G + ["--", "-dash.py", "-o", "out/"], {}
    yield "generate ./-dash.py", G + ["./-dash.py", "-o", "out/"], {}
    yield "generate abs path", G + ["{root}/good.py", "-o", "out/abs.py"], {}
    yield "generate ../ path", G + ["../good.py", "-o", "abs2.py"], {"cwd": "adir"}
    yield "generate stdin.py (stdin a pipe)", G + ["stdin.py", "-o", "out/"], {"stdin": "pipe", "timeout": 60}
    yield "generate sleeps.py", G + ["sleeps.py", "-o", "out/"], {"timeout": 25}
    yield "generate REF and --problem", G + ["good.py", "--problem", "gemm_scale_bn"], {}
    # outputs
    yield "generate -o existing other file", G + ["good.py", "-o", "existing.py"], {"pre": "existing"}
    yield "generate -o same twice", G + ["good.py", "-o", "twice.py"], {"pre": "twice"}
    yield "generate -o dir (exists)", G + ["good.py", "-o", "adir"], {}
    yield "generate -o newdir/", G + ["good.py", "-o", "newdir/"], {}
    yield "generate -o newdir2 (no slash)", G + ["good.py", "-o", "newdir2"], {}
    yield "generate -o deep/new/x.py", G + ["good.py", "-o", "deep/new/x.py"], {}
    yield "generate -o ro/x.py", G + ["good.py", "-o", "ro/x.py"], {}   # (root ignores the mode)
    yield "generate -o /proc/x.py", G + ["good.py", "-o", "/proc/kgen_probe.py"], {}
    yield "generate -o x.txt", G + ["good.py", "-o", "x.txt"], {}
    yield "generate -o under a file", G + ["good.py", "-o", "good.py/x.py"], {}
    yield "generate -o the reference", G + ["good.py", "-o", "good.py"], {}
    yield "generate -o the reference --force (through a link)", G + ["victim_link.py", "-o", "victim_link.py", "--force"], {"pre": "victim"}
    yield "generate -o dangling symlink", G + ["good.py", "-o", "dangling.py"], {}
    yield "generate -o /dev/null", G + ["good.py", "-o", "/dev/null"], {}
    yield "generate -o pipe.py (a FIFO)", G + ["good.py", "-o", "fifo.py"], {"pre": "fifo", "timeout": 60}
    # options
    for opts in (["--batch", "0"], ["--batch", "-1"], ["--batch", "1"], ["--batch", "abc"], ["--batch", "1e3"],
                 ["--in", "0"], ["--out", "x.py"], ["--tile", "garbage"], ["--tile", "0x0x0"],
                 ["--tile", "128x128x32", "--backend", "cublas"], ["--tile", "96x96x32"],
                 ["--math", "fp64"], ["--math", "bf16", "--backend", "kgen"], ["--arch", "sm_75"], ["--dtype", "fp8"],
                 ["--dtype", "bfloat16"], ["--dtype", "bf16"], ["--stages", "1"], ["--stages", "99"],
                 ["--group", "0"], ["--fusion", "3"], ["--set", "nothing=3"], ["--set", "in_features=abc"],
                 ["--set", "in_features"], ["--set", "batch_size=0"], ["--set", "in_features=-4"],
                 ["--results-dir", "nowhere"], ["--results-dir", "good.py"], ["--warp", "64"],
                 ["--thread", "8x8"], ["--in", "100000", "--out", "100000"]):
        yield "generate " + " ".join(opts), G + ["good.py", "-o", "out/"] + opts, {}
    # GPU commands on a CPU host
    yield "search good.py", ["search", "good.py", "--out-dir", "s_gen", "--results-dir", "s_res"], {}
    yield "search --problem", ["search", "--problem", "gemm_scale_bn", "--out-dir", "s_gen", "--results-dir", "s_res"], {}
    yield "search unsupported.py", ["search", "unsupported.py"], {}
    yield "search --tol 0", ["search", "good.py", "--tol", "0"], {}
    yield "search --gpus 0", ["search", "good.py", "--gpus", "0"], {}
    yield "search --plot x.txt", ["search", "good.py", "--plot", "x.txt"], {}
    yield "search two files --batch", ["search", "good.py", "random.py", "--batch", "8"], {}
    yield "validate generated", ["validate", "out/good.py.gen.py"], {}
    yield "validate the reference", ["validate", "good.py"], {}
    yield "validate empty", ["validate", "empty.py"], {}
    yield "validate missing", ["validate", "missing.py"], {}
    yield "validate --tol -1", ["validate", "out/good.py.gen.py", "--tol", "-1"], {}
    yield "validate --ref other", ["validate", "out/good.py.gen.py", "--ref", "unsupported.py"], {}
    yield "bench generated", ["bench", "out/good.py.gen.py"], {}
    yield "bench --iters 5", ["bench", "out/good.py.gen.py", "--iters", "5"], {}
    yield "bench the reference", ["bench", "good.py"], {}
    # records
    yield "list (no results here)", ["list"], {}
    yield "winners --results-dir missing", ["winners", "--results-dir", "nowhere"], {}
    yield "winners --results-dir corrupt", ["winners", "--results-dir", "corrupt"], {"pre": "corrupt"}
    yield "winners --json corrupt", ["winners", "--json", "--results-dir", "corrupt"], {"pre": "corrupt"}
    yield "generate with corrupt results/", G + ["good.py", "-o", "out/corrupt_results.py", "--results-dir", "corrupt"], {"pre": "corrupt"}
    yield "plot corrupt", ["plot", "corrupt/search_bad.json"], {"pre": "corrupt"}
    yield "plot missing", ["plot", "nothing.json"], {}
    yield "plot good.py", ["plot", "good.py"], {}
    yield "plot empty record", ["plot", "corrupt/search_empty.json"], {"pre": "corrupt"}
    yield "ops", ["ops"], {}
    if kb and kb.is_dir():
        for name in sorted(kb.glob("56_*.py"))[:1] + sorted(kb.glob("12_*.py"))[:1]:
            yield f"generate KB {name.name}", G + [str(name), "-o", f"out/kb_{name.name}"], {"timeout": 300}


def prepare(root: Path, pre: str | None):
    (root / "good.py").write_text(GOOD)   # (a case that overwrites it must not spoil the next)
    if pre == "victim":
        (root / "victim.py").write_text(GOOD)
        (root / "victim_link.py").unlink(missing_ok=True)
        os.symlink("victim.py", root / "victim_link.py")
    elif pre == "fifo":
        if not (root / "fifo.py").exists():
            os.mkfifo(root / "fifo.py")
    elif pre == "existing":
        (root / "existing.py").write_text("# my own edits\n")
    elif pre == "twice":
        (root / "twice.py").unlink(missing_ok=True)
        subprocess.run(KGEN + ["generate", "good.py", "-o", "twice.py"], cwd=root, capture_output=True)
    elif pre == "corrupt":
        d = root / "corrupt"
        d.mkdir(exist_ok=True)
        (d / "search_bad.json").write_text('{"candidates": [1, 2,')
        (d / "search_empty.json").write_text('{"candidates": []}')
        (d / "search_list.json").write_text('[1, 2, 3]')
        (d / "search_nowinners.json").write_text('{"winners": 5, "candidates": {}}')
        (d / "search_binary.json").write_bytes(b"\xff\xfe\x00garbage")


def listing(root: Path) -> set[str]:
    out = set()
    for dirpath, dirs, files in os.walk(root):
        for f in files:
            out.add(os.path.relpath(os.path.join(dirpath, f), root))
    return out


def summarize(text: str, n=3) -> str:
    lines = [l for l in text.strip().splitlines() if l.strip()]
    if len(lines) <= 2 * n:
        return " | ".join(lines)
    return " | ".join(lines[:n]) + " | ... | " + " | ".join(lines[-n:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kb", type=Path, default=Path("/work/main/.kb/level2"))
    ap.add_argument("--only", default=None)
    ap.add_argument("--start", default=None, help="skip the cases before the first whose name has this")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="kgen_cli_probe_"))
    scratch_refs(root)
    results = []
    try:
        for name, argv, opt in cases(args.kb):
            if args.start and args.start in name:
                args.start = None
            if args.only and args.only not in name or args.start:
                continue
            prepare(root, opt.get("pre"))
            before = listing(root)
            argv = [a.replace("{root}", str(root)) for a in argv]
            stdin = subprocess.PIPE if opt.get("stdin") == "pipe" else subprocess.DEVNULL
            cwd = root / opt.get("cwd", "")
            exe = [opt["exe"]] if "exe" in opt else KGEN
            rc, secs, out, err = run(exe + argv, cwd, timeout=opt.get("timeout", 180), stdin=stdin)
            new = sorted(listing(root) - before)
            tb = "Traceback" in out + err
            row = dict(case=name, rc=rc, s=round(secs, 1), traceback=tb, stdout=summarize(out),
                       stderr=summarize(err), new_files=new)
            results.append(row)
            print(f"[{rc}] {secs:5.1f}s {'TB ' if tb else ''}{name}\n    out: {row['stdout'][:600]}\n"
                  f"    err: {row['stderr'][:600]}\n    new: {new}", flush=True)
        if not args.only or "SIGINT" in args.only or "race" in args.only:
            results += special(root)
    finally:
        os.chmod(root / "ro", 0o755)
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print("scratch kept at", root)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, ensure_ascii=False))


def special(root: Path):
    rows = []
    # SIGINT during generate: at 1 s (torch's import), 2.5 s (the trace), and once 'target' is printed.
    for label, after, marker in (("SIGINT generate at 1s", 1.0, None), ("SIGINT generate at 2.5s", 2.5, None),
                                 ("SIGINT generate after 'chose'", 0.0, "chose ")):
        target = root / "sig" / f"{label.replace(' ', '_')}.py"
        rc, secs, out, _ = interrupt(KGEN + ["generate", "good.py", "-o", str(target)], root, after, marker)
        left = sorted(p.name for p in (root / "sig").glob("*")) if (root / "sig").exists() else []
        rows.append(dict(case=label, rc=rc, s=round(secs, 1), traceback="Traceback" in out,
                         stdout=summarize(out), stderr="", new_files=left))
        print(f"[{rc}] {label}: stopped in {secs:.1f}s tb={'Traceback' in out}\n    {summarize(out)[:800]}\n    left: {left}")
    rc, secs, out, _ = interrupt(KGEN + ["generate", "sleeps.py", "-o", "out/"], root, 5.0)
    rows.append(dict(case="SIGINT generate sleeps.py", rc=rc, s=round(secs, 1), traceback="Traceback" in out,
                     stdout=summarize(out), stderr="", new_files=[]))
    print(f"[{rc}] SIGINT sleeps.py: stopped in {secs:.1f}s tb={'Traceback' in out}\n    {summarize(out)[:800]}")
    rc, secs, out, _ = interrupt(KGEN + ["search", "good.py", "--out-dir", "sig_gen", "--results-dir", "sig_res"],
                                 root, 2.0)
    left = sorted(listing(root / "sig_gen")) + sorted(listing(root / "sig_res")) if (root / "sig_gen").exists() else []
    rows.append(dict(case="SIGINT search", rc=rc, s=round(secs, 1), traceback="Traceback" in out,
                     stdout=summarize(out), stderr="", new_files=left))
    print(f"[{rc}] SIGINT search: stopped in {secs:.1f}s tb={'Traceback' in out}\n    {summarize(out)[:800]}")
    # Two generates of one file into one output at once, each variant twice, then a check that the
    # file is whole (it parses and names one of the two variants).
    for label, a, b in (("race same variant", [], []),
                        ("race two variants", ["--math", "tf32x3"], ["--math", "fp32_simt", "--backend", "kgen"])):
        target = root / "race" / "same.py"
        if target.exists():
            target.unlink()
        procs = [subprocess.Popen(KGEN + ["generate", "good.py", "-o", str(target)] + extra, cwd=root,
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for extra in (a, b)]
        outs = [p.communicate(timeout=180) for p in procs]
        rcs = [p.returncode for p in procs]
        try:
            import ast
            ast.parse(target.read_text())
            whole = "parses"
        except Exception as e:  # noqa: BLE001
            whole = f"broken: {e}"
        leftovers = sorted(p.name for p in target.parent.iterdir())
        row = dict(case=label, rc=rcs, s=0, traceback=any("Traceback" in o + e for o, e in outs),
                   stdout=" || ".join(summarize(o, 1) for o, _ in outs),
                   stderr=" || ".join(summarize(e, 1) for _, e in outs), new_files=leftovers + [whole])
        rows.append(row)
        print(f"[{rcs}] {label}: {whole}; {leftovers}\n    out: {row['stdout'][:800]}\n    err: {row['stderr'][:800]}")
    return rows


if __name__ == "__main__":
    main()
