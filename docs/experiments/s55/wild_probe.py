"""Session 55's exploratory driver: every generated spelling (tests/wild_spellings.py) traced, its IR checked
against the module (tests/test_spellings_ops.check: fp64 oracle in training and eval, gradients
against torch.autograd, lowering), then `kgen generate` run on it, the emitted file constructed
beside the reference under one seed (same state_dict) and checked by KernelBench's static checker.

    PYTHONPATH=.:tests python docs/experiments/s55/wild_probe.py [--gen] [--only SUBSTR] > out.txt

Prints one line per case: TAKEN / REFUSED (the message's first line) / WRONG / CRASH (a traceback's
last line), then a tally."""

import argparse
import importlib.util
import itertools
import random
import sys
import tempfile
import traceback
from pathlib import Path

import torch
from click.testing import CliRunner

import wild_spellings as S
from kgen.check.static_checks import check_emitted
from kgen.cli import main
from kgen.frontend.reference import Reference
from kgen.ir.graph import Unsupported
from test_spellings_ops import check as _check
from test_ir import check_oracle
from test_autodiff import check_module_gradients
from kgen.lower import forward as lower
from _pytest.outcomes import Skipped


def check(ref):
    """test_spellings_ops.check, or, where a dropout is active in training mode (its mask is
    random), the same checks in eval mode alone."""
    try:
        return _check(ref)
    except RuntimeError as e:
        if "does not require grad" not in str(e):
            raise
        # a forward under @torch.no_grad(): no gradient to check
        graph = check_oracle(ref, True)
        check_oracle(ref, False)
        lower.lower(graph, fused_stats=True, external_gemm=False)
        return graph
    except Skipped:
        graph = check_oracle(ref, False)
        check_module_gradients(ref, False)
        lower.lower(graph, fused_stats=True, external_gemm=False)
        return graph
from test_styles import assert_same_state

KB = Path("/work/main/.kb/src/kernelbench/kernel_static_checker.py")


def kb_checker():
    spec = importlib.util.spec_from_file_location("kb_static", KB)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m.validate_kernel_static


def run_case(d: dict, tmp: Path, gen: bool, kb) -> tuple[str, str]:
    kw = {k: v for k, v in d.items()}
    src = S.source(**kw)
    path = tmp / "ref_case.py"
    path.write_text(src)
    try:
        ref = Reference(path)
        check(ref)
    except Unsupported as e:
        return "REFUSED", str(e).splitlines()[0].replace(str(path), "REF")
    except AssertionError as e:
        return "WRONG", str(e).splitlines()[0][:300]
    except Exception as e:  # noqa: BLE001
        tb = traceback.format_exc().strip().splitlines()
        return "CRASH", f"{type(e).__name__}: {str(e)[:200]} @ {[l for l in tb if 'File' in l][-1].strip()[:160]}"
    if not gen:
        return "TAKEN", ""
    out = tmp / "new_case.py"
    r = CliRunner().invoke(main, ["generate", str(path), "-o", str(out), "--force", "--results-dir", str(tmp / "r")])
    if r.exit_code != 0:
        return "GENFAIL", (r.output.strip().splitlines() or [repr(r.exception)])[-1][:300]
    text = out.read_text()
    problems = check_emitted(text)
    valid, errors, _ = kb(text, backend="cuda", precision="fp32")
    if problems or not valid:
        return "STATIC", f"{problems} {errors}"[:300]
    try:
        ctx: dict = {}
        exec(compile(src, str(path), "exec"), ctx)
        torch.manual_seed(42)
        expect = ctx["Model"](*ctx["get_init_inputs"]()).state_dict()
        ns: dict = {}
        exec(compile(text, str(out), "exec"), ns)
        torch.manual_seed(42)
        got = ns["ModelNew"](*ns["get_init_inputs"]()).state_dict()
        assert_same_state(got, expect, "constructed")
    except AssertionError as e:
        return "WRONGBUILD", str(e)[:300]
    except Exception as e:  # noqa: BLE001
        return "BUILDCRASH", f"{type(e).__name__}: {str(e)[:200]}"
    return "TAKEN", "generated"


def main_():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gen", action="store_true")
    ap.add_argument("--only", default="")
    ap.add_argument("--show", default="")
    args = ap.parse_args()
    if args.show:
        d = dict(zip(("config", "act", "wt", "structure", "decor"), args.show.split("|")))
        print(S.source(**d))
        return
    kb = kb_checker()
    tally: dict = {}
    all_cases = S.cases(random.Random(55))
    with tempfile.TemporaryDirectory() as t:
        for i, (key, d) in enumerate(all_cases.items()):
            if args.only not in key:
                continue
            tmp = Path(t) / str(i)
            tmp.mkdir()
            status, msg = run_case(d, tmp, args.gen, kb)
            tally[status] = tally.get(status, 0) + 1
            print(f"{status:10s} {key}  {msg}", flush=True)
    print(tally)


if __name__ == "__main__":
    main_()
