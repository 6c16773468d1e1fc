#!/usr/bin/env python3
"""Session 55's usage probe: how users actually use an emitted ModelNew file, beyond tests/*_gpu.py.

For five reference modules written here (a Linear-ReLU-Linear MLP; Linear-BatchNorm1d-GELU;
Linear-softmax; Linear + bias parameter - LeakyReLU; Linear x a per-feature Parameter scale - SiLU),
`kgen generate` writes a file each (its default choice: fp16x3 / tf32x3 on the wgmma GEMM), and
every case runs one usage pattern three times: on ModelNew (imported as a user imports it, with the
reference's state_dict), on the reference module in the same dtype ("eager") and on an fp64 copy of
the reference ("exact"). Every tensor the pattern yields (outputs, gradients, parameters after an
optimizer's steps, BatchNorm's buffers) is compared with exact's: kgen's error beside eager's own.
Verdicts:
  ok        kgen's error <= FACTOR x eager's (+ a floor of a few ulps of the value's scale), or both
            raise
  WRONG     beyond that, a NaN / Inf where exact has none (or the reverse), a shape or None mismatch
  REFUSED   ModelNew raised an error of its own (names ModelNew / kgen) where eager ran
  ERROR     ModelNew raised anything else where eager ran
  DIFFERS   eager raised and ModelNew did not (its outputs are still compared with exact's where
            exact ran)
  TIMEOUT / CRASH   the case ran past its budget / its process died (the worker is restarted at the
            next case)
  CTRL      a compile case (compile_*), which also compiles the reference the same way (the control):
            ModelNew fails as the compiled reference does (the same exception type; or each value
            off is as far off there), so the case's own doing or torch.compile's, not kgen's
  KINK      a WRONG on a file with a kink at its output (LeakyReLU after the GEMM): the case run
            again with every forward's output recorded; output elements on the other side of 0 than
            fp64's (kgen's and eager's) counted, min |z64| / its row's max reported, and the
            comparison with those elements' rows (dx, outputs) and feature columns (W's rows, the
            bias, outputs' columns) left out passes. (A WRONG that does not pass so stays WRONG, the
            diagnosis in its note; the MLP's hidden ReLU is not observable: not diagnosed.)
A REFUSED that is kgen's words for what it does not do (EXPECTED: torch.func's gradients, create_graph,
a CPU input) is said so in the short summary.

Run from the repository root on a GPU machine (after `pip install -e . --no-deps`):
    python3 docs/experiments/s55/usage_probe.py            # everything; results under $OUT (/tmp/out)
    python3 docs/experiments/s55/usage_probe.py --only 'edit_*' --files mlp
    python3 docs/experiments/s55/usage_probe.py --dry-run  # no GPU: generation, and every case on the
        CPU with ModelNew's forward stubbed by the reference's (the plumbing; CUDA-only cases skipped)
    python3 docs/experiments/s55/usage_probe.py --list     # the case list
Output: $OUT/usage/results.jsonl (a line per case), $OUT/usage/summary.txt (a table and every
non-ok case's detail, rewritten as results come in), $OUT/usage/builds.txt, workers' logs.
Phases: generation (parallel `kgen generate`), builds (every file x dtype at once, one process
each, as scripts/device_setup.sh's build_files), cases (--main-workers / --compile-workers processes
per file and group, the cases balanced among them by round 1's times, all started beside the builds:
a first forward waits in torch's build lock; each on one CPU thread; a per-case budget, counted from
the builds' end, enforced by the parent, which kills a stuck worker and restarts it at the next
case; a global deadline, USAGE_DEADLINE or --deadline seconds from the start, after which it stops
and writes the summaries). Round 1 (ten workers, 16 OpenMP threads each) left 107 of 411 cases
unrun at 360 s; its outputs' seconds fill EST.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import fnmatch
import importlib.util
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
import traceback
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
FACTOR = 16.0

# ---------------------------------------------------------------------------------------------
# The reference modules.

TAIL2 = """

def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [{init}]
"""

REFS = {
    "mlp": ('''import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear -> ReLU -> Linear (a small MLP)."""

    def __init__(self, in_features, hidden_features, out_features):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden_features)
        self.fc2 = nn.Linear(hidden_features, out_features)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


batch_size = 512
in_features = 1024
hidden_features = 512
out_features = 256
''', "in_features, hidden_features, out_features"),
    "gemm_bn_gelu": ('''import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear -> BatchNorm1d -> GELU (KernelBench level 2 style)."""

    def __init__(self, in_features, out_features):
        super(Model, self).__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.batch_norm = nn.BatchNorm1d(out_features)

    def forward(self, x):
        x = self.gemm(x)
        x = self.batch_norm(x)
        x = torch.nn.functional.gelu(x)
        return x


batch_size = 256
in_features = 1024
out_features = 512
''', "in_features, out_features"),
    "gemm_softmax": ('''import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear -> softmax over the features."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = self.linear(x)
        return torch.softmax(x, dim=1)


batch_size = 256
in_features = 512
out_features = 1024
''', "in_features, out_features"),
    "gemm_bias_leakyrelu": ('''import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear (no bias) -> + bias Parameter -> LeakyReLU(0.2)."""

    def __init__(self, in_features, out_features, negative_slope):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(out_features) * 0.1)
        self.negative_slope = negative_slope

    def forward(self, x):
        x = self.gemm(x) + self.bias
        return torch.nn.functional.leaky_relu(x, negative_slope=self.negative_slope)


batch_size = 512
in_features = 1024
out_features = 768
negative_slope = 0.2
''', "in_features, out_features, negative_slope"),
    "gemm_scale_silu": ('''import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear -> x a per-feature Parameter scale -> SiLU."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = nn.Parameter(torch.rand(out_features) + 0.5)

    def forward(self, x):
        return torch.nn.functional.silu(self.linear(x) * self.scale)


batch_size = 128
in_features = 256
out_features = 512
''', "in_features, out_features"),
}

# The builds made up front, per file: (dtype, autocast, fp32_weight). Others a case needs are built
# on its first use (inside the case's budget).
# (a build that is not there, e.g. an fp32_weight build of a file without _KGEN_FP32_WEIGHT, is the
# plain autocast one: harmless.)
F32, BF16, FP16 = ("float32", False, False), ("bfloat16", False, False), ("float16", False, False)
FP16_AC, FP16_AC_W, BF16_AC = ("float16", True, False), ("float16", True, True), ("bfloat16", True, False)
BUILDS = {
    "mlp": [F32, BF16, FP16, FP16_AC, FP16_AC_W, BF16_AC],
    "gemm_bn_gelu": [F32, FP16, BF16, FP16_AC, BF16_AC],
    "gemm_softmax": [F32, BF16, BF16_AC],
    "gemm_bias_leakyrelu": [F32, FP16, FP16_AC, FP16_AC_W],
    "gemm_scale_silu": [F32],
}
# Which files run the cases that need a 16-bit build (the rest would build it inside the case).
BF16_FILES = ("mlp", "gemm_softmax")                        # cases @bf16: the module in bf16
HALF_FILES = ("mlp", "gemm_bn_gelu", "gemm_bias_leakyrelu")  # .half(), fp16 autocast + GradScaler
BF16_MOVE_FILES = ("mlp", "gemm_bn_gelu", "gemm_softmax")   # .to(bf16), bf16 autocast training
FP16_INFER_FILES = ("mlp", "gemm_bias_leakyrelu")           # fp16 autocast inference


# ---------------------------------------------------------------------------------------------
# Case registry.

CASES = {}   # name -> dict(fn, group, budget, cuda, files, dtype)


def case(name, group="main", budget=120, cuda=False, files=None, dtypes=("float32",)):
    def deco(fn):
        for dt in dtypes:
            full = name if dt == "float32" else f"{name}@{ {'bfloat16': 'bf16', 'float16': 'fp16'}[dt]}"
            CASES[full] = dict(fn=fn, group=group, budget=budget, cuda=cuda, files=files, dtype=dt, name=full)
        return fn
    return deco


def cases_for(file_name, only, groups=None):
    out = []
    for name, c in CASES.items():
        if c["files"] is not None and file_name not in c["files"]:
            continue
        if c["dtype"] != "float32" and file_name not in BF16_FILES:
            continue
        if only and not any(fnmatch.fnmatch(name, p) for p in only):
            continue
        if groups and c["group"] not in groups:
            continue
        out.append(name)
    # CUDA graphs (quick) before the torch.compile cases (slow), which the deadline may cut
    return sorted(out, key=lambda n: CASES[n]["group"] == "compile" and not n.startswith("cuda_graph"))


# ---------------------------------------------------------------------------------------------
# Worker side: context, comparisons.

class Refusal(Exception):
    pass


class Ctx:
    def __init__(self, torch, file_name, ref_mod, new_mod, new_cls, dev, dtype_name, dry):
        self.torch = torch
        self.file = file_name
        self.ref_mod = ref_mod
        self.new_mod = new_mod
        self.New = new_cls
        self.dev = dev
        self.dry = dry
        self.dtype = getattr(torch, dtype_name)
        self.init = list(ref_mod.get_init_inputs())
        self.B = ref_mod.batch_size
        self.K = ref_mod.in_features
        self.BIG = 512
        self.has_bn = "bn" in file_name
        self.record = None   # {role: [outputs]} while kink_diagnosis re-runs a case

    def dt(self, role):
        return self.torch.float64 if role == "exact" else self.dtype

    def randn(self, *shape, seed=1):
        g = self.torch.Generator().manual_seed(seed)
        return self.torch.randn(*shape, generator=g).to(self.dev)

    def x(self, role, batch=None, seed=1, rg=False):
        x = self.randn(batch or self.B, self.K, seed=seed).to(self.dt(role))
        return x.requires_grad_() if rg else x

    def like(self, t, seed, role, scale=1.0):
        return (self.randn(*t.shape, seed=seed) * scale).to(t.dtype if role != "exact" else self.torch.float64)

    def base_state(self, seed=0):
        """A reference's state (fp32, on dev), BatchNorm's running stats moved off their defaults."""
        torch = self.torch
        torch.manual_seed(seed)
        ref = self.ref_mod.Model(*self.init)
        with torch.no_grad():
            for name, b in ref.named_buffers():
                if name.endswith("running_mean"):
                    b.copy_(torch.randn_like(b) * 0.1)
                elif name.endswith("running_var"):
                    b.copy_(torch.rand_like(b) + 0.5)
        return {k: v.to(self.dev) for k, v in ref.state_dict().items()}

    def make(self, role, seed=0, dtype=None):
        """A module for `role` (new: ModelNew; eager: the reference; exact: the reference in fp64 of
        the `dtype`-rounded state), weights from base_state(seed)."""
        torch = self.torch
        dtype = dtype or self.dtype
        cls = self.New if role == "new" else self.ref_mod.Model
        with torch.device("cpu"):
            m = cls(*self.init)
        m = m.to(self.dev)
        m.load_state_dict(self.base_state(seed))
        m = m.to(dtype)
        if role == "exact":
            m = m.double()
        if self.record is not None:
            m.register_forward_hook(_record_hook(self, role))
        return m

    def linears(self, m):
        return [mod for mod in m.modules() if isinstance(mod, self.torch.nn.Linear)]

    def out_grad(self, y, seed=7):
        return self.randn(*y.shape, seed=seed).to(y.dtype)


def grads(m, prefix="grad."):
    return {prefix + n: p.grad for n, p in m.named_parameters()}


def state(m, prefix="state."):
    return {prefix + k: v for k, v in m.state_dict().items() if v.is_floating_point()}


def looks_own(e):
    text = f"{type(e).__name__}: {e}"
    return isinstance(e, (TypeError, ValueError, RuntimeError, NotImplementedError)) and (
        "ModelNew" in text or "kgen" in text)


def compare(torch, key, a, b, e, dtype, factor=FACTOR, c=None, mask=None):
    """a: kgen's, b: eager's, e: exact (fp64)'s value of `key`; c: the control's (a compile case's
    compiled reference), reported beside; mask: elements left out (a kink's flipped rows / columns).
    Returns a metric dict."""
    m = {"key": key}
    if key.startswith("eq."):
        # compared between kgen and eager only (a GradScaler's scale, a count)
        same = (a is None and b is None) or (a is not None and b is not None and torch.equal(
            torch.as_tensor(a).double().cpu(), torch.as_tensor(b).double().cpu()))
        m.update(ok=bool(same), note=f"kgen {_short(a)} eager {_short(b)}")
        return m
    if a is None or e is None:
        m.update(ok=(a is None) == (e is None), note=f"None: kgen {a is None}, exact {e is None}")
        return m
    if not isinstance(a, torch.Tensor):
        a, b, e, c = (torch.as_tensor(v, dtype=torch.float64) if v is not None and not isinstance(v, torch.Tensor)
                      else v for v in (a, b, e, c))
    if tuple(a.shape) != tuple(e.shape):
        m.update(ok=False, note=f"shape kgen {tuple(a.shape)} exact {tuple(e.shape)}")
        return m
    a64, e64 = a.detach().double().cpu(), e.detach().double().cpu()
    b64 = b.detach().double().cpu() if isinstance(b, torch.Tensor) and tuple(b.shape) == tuple(e.shape) else None
    c64 = c.detach().double().cpu() if isinstance(c, torch.Tensor) and tuple(c.shape) == tuple(e.shape) else None
    fin_a, fin_e = torch.isfinite(a64), torch.isfinite(e64)
    keep = torch.ones_like(fin_e) if mask is None else ~mask
    if not torch.equal(fin_a & keep, fin_e & keep):
        bad = int(((fin_a != fin_e) & keep).sum())
        eager_bad = int(((torch.isfinite(b64) != fin_e) & keep).sum()) if b64 is not None else -1
        m.update(ok=bad <= max(eager_bad, 0), note=f"non-finite pattern differs at {bad} elements (eager {eager_bad})")
        if not m["ok"]:
            return m
    both = fin_a & fin_e & keep
    scale = e64[both].abs().max().item() if both.any() else 0.0
    err = (a64 - e64)[both].abs().max().item() if both.any() else 0.0

    def err_of(v64):
        if v64 is None or not both.any():
            return float("nan")
        sel = both & torch.isfinite(v64)
        return (v64 - e64)[sel].abs().max().item() if sel.any() else float("nan")
    eager_err = err_of(b64)
    eps = torch.finfo(dtype).eps
    floor = 4 * eps * scale + 1e-30
    ok = err <= factor * (eager_err if eager_err == eager_err else 0.0) + floor
    m.update(ok=bool(ok), err=err, eager_err=eager_err, scale=scale, floor=floor,
             ratio=(err / eager_err) if eager_err and eager_err == eager_err else None)
    if c is not None:
        m["ctrl_err"] = err_of(c64)
    if mask is not None:
        m["masked"] = int(mask.sum())
    return m


def _short(v):
    try:
        return f"{float(v):.6g}"
    except Exception:  # noqa: BLE001
        return repr(v)[:60]


def snapshot(torch, out):
    """A role's results read at once (copies on the CPU): an error reading one (a CUDA graph's
    output overwritten by a later replay) is that role's, not the comparison's."""
    def one(v):
        if isinstance(v, torch.Tensor):
            return v.detach().cpu().clone()
        return v
    return {k: one(v) for k, v in out.items()}


TRIO = ("exact", "eager", "new")
WITH_CONTROL = ("exact", "eager", "control", "new")   # control: the reference compiled as ModelNew is


def run_roles(ctx, scenario, roles):
    torch = ctx.torch
    results, errors, warned, took = {}, {}, {}, {}
    for role in roles:
        t0 = time.time()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                results[role] = snapshot(torch, scenario(ctx, role))
            except Exception as e:  # noqa: BLE001
                if ctx.dev.type == "cuda" and _cuda_broken(torch):
                    raise
                errors[role] = e
        took[role] = round(time.time() - t0, 2)
        msgs = [f"{w.category.__name__}: {w.message}" for w in caught]
        if role == "new" and msgs:
            warned[role] = list(dict.fromkeys(m[:300] for m in msgs))[:4]
    return results, errors, warned, took


def run_trio(ctx, scenario, dtype=None, roles=TRIO):
    """scenario(ctx, role) for role in exact, eager, (control,) new; the comparisons of what each
    yields. The verdict is the new role's; a compile case's control (the reference compiled the same
    way) tells kgen's doing from the case's own or torch.compile's: CTRL where it fails the same way."""
    torch = ctx.torch
    t0 = time.time()
    results, errors, warned, took = run_roles(ctx, scenario, roles)
    rec = {"metrics": [], "errors": {r: _exc(e) for r, e in errors.items()}, "warnings": warned.get("new", []),
           "t": took}
    new_e, eager_e, ctrl_e = errors.get("new"), errors.get("eager"), errors.get("control")
    if new_e is not None:
        if eager_e is not None:
            rec["verdict"] = "ok"
            rec["note"] = "both raise"
        elif ctrl_e is not None and type(ctrl_e) is type(new_e):
            rec["verdict"] = "CTRL"
            rec["note"] = (f"the compiled reference raises {type(ctrl_e).__name__} too: the case's doing or "
                           "torch.compile's, not kgen's")
        else:
            rec["verdict"] = "REFUSED" if looks_own(new_e) else "ERROR"
            if "control" in roles:
                rec["note"] = ("the compiled reference runs" if ctrl_e is None
                               else f"the compiled reference raises another error ({type(ctrl_e).__name__})")
        return rec
    verdict = "DIFFERS" if eager_e is not None else "ok"
    exact = results.get("exact")
    if exact is None:
        rec["verdict"] = verdict
        rec["note"] = "exact raised: nothing to compare with"
        return rec
    verdict, note = judge(ctx, rec, results, dtype, verdict)
    if ctrl_e is not None:
        note = (note + f"; the compiled reference raised {type(ctrl_e).__name__}").strip("; ")
    if verdict == "WRONG" and "control" in results:
        bad = [m for m in rec["metrics"] if not m["ok"]]
        if bad and all("err" in m and m.get("ctrl_err") == m.get("ctrl_err")
                       and m["ctrl_err"] > FACTOR * (m["eager_err"] if m["eager_err"] == m["eager_err"] else 0.0) + m["floor"]
                       and m["err"] <= FACTOR * m["ctrl_err"] + m["floor"] for m in bad):
            verdict = "CTRL"
            note = (note + "; the compiled reference is as far off on each value that fails: torch.compile's "
                    "doing, not kgen's").strip("; ")
    if verdict == "WRONG" and ctx.file in KINKS and CASES_BY_FN.get(scenario, {}).get("group") != "compile":
        verdict, note = kink_diagnosis(ctx, scenario, dtype, rec, note)
    rec["verdict"] = verdict
    if note:
        rec["note"] = note
    rec["t"]["total"] = round(time.time() - t0, 2)
    return rec


# Files whose module has a kink after a GEMM (its derivative jumps there): an element of the
# pre-activation within rounding of 0 can land on the other side in kgen's fp32 rounding than in
# fp64 (or in eager's), and the gradient then differs by a whole row of dx and a row of dW (and,
# after optimizer steps, Adam's near-zero moments amplify it). At the output (LeakyReLU, which keeps
# the sign), the branch taken shows in the output's sign; a hidden one (the MLP's ReLU) does not.
KINKS = {"gemm_bias_leakyrelu": dict(at="output", slope=0.2),
         "mlp": dict(at="hidden", why="kink diagnosis: the MLP's ReLU is inside ModelNew's fused kernels, "
                     "its branches not observable: not diagnosed")}


def _record_hook(ctx, role):
    torch = ctx.torch

    def hook(mod, inp, out):
        if isinstance(out, torch.Tensor) and not torch._C._functorch.is_functorch_wrapped_tensor(out):
            ctx.record.setdefault(role, []).append(out.detach().double().cpu())
    return hook


def kink_diagnosis(ctx, scenario, dtype, rec, note):
    """The case again with every module's outputs recorded: per forward, the output elements whose
    branch (the sign) differs from fp64's, in kgen's and in eager's; then the comparison with those
    elements' rows (of the batch: dx, outputs) and columns (features: W's rows, the bias, outputs'
    columns) left out. KINK where that passes: the WRONG is kink flips only."""
    torch = ctx.torch
    kink = KINKS[ctx.file]
    if kink["at"] != "output":
        return "WRONG", (note + "; " + kink["why"]).strip("; ")
    ctx.record = {}
    try:
        results, errors, _, _ = run_roles(ctx, scenario, TRIO)
    finally:
        calls, ctx.record = ctx.record, None
    if errors:
        return "WRONG", (note + f"; kink diagnosis: the re-run with recording hooks raised in {sorted(errors)}").strip("; ")
    ex, ea, nw = (calls.get(r, []) for r in TRIO)
    if not ex or not len(ex) == len(ea) == len(nw):
        return "WRONG", (note + f"; kink diagnosis: forwards do not align ({len(ex)}, {len(ea)}, {len(nw)})").strip("; ")
    N = ex[0].shape[-1]
    flips = {"new": 0, "eager": 0}
    cols, rows = set(), {}
    min_flip, min_all = float("inf"), float("inf")
    for e, g, n in zip(ex, ea, nw):
        if e.dim() != 2 or e.shape != n.shape or e.shape != g.shape or e.shape[0] == 0:
            continue
        z = torch.where(e > 0, e, e / kink["slope"])   # fp64's pre-activation (LeakyReLU inverts)
        rel = z.abs() / z.abs().amax(dim=1, keepdim=True).clamp_min(1e-300)
        fn_, fe = (n > 0) != (e > 0), (g > 0) != (e > 0)
        flips["new"] += int(fn_.sum())
        flips["eager"] += int(fe.sum())
        flip = fn_ | fe
        min_all = min(min_all, rel.min().item())
        if flip.any():
            min_flip = min(min_flip, rel[flip].min().item())
            idx = flip.nonzero()
            rows.setdefault(e.shape[0], set()).update(idx[:, 0].tolist())
            cols.update(idx[:, 1].tolist())
    info = {"forwards": len(ex), "flips_kgen": flips["new"], "flips_eager": flips["eager"],
            "columns": sorted(cols)[:20], "rows": {b: sorted(r)[:20] for b, r in rows.items()},
            "min_rel_z_flipped": min_flip, "min_rel_z_all": min_all}
    rec["kink"] = info
    what = (f"kink: {flips['new']} kgen / {flips['eager']} eager output elements on the other side of 0 than "
            f"fp64 over {len(ex)} forwards (min |z64| / row max: flipped {min_flip:.1e}, all {min_all:.1e})")
    if not cols:
        return "WRONG", (note + "; " + what + ": no flip, so not a kink's doing").strip("; ")
    masks = {}
    for key, t in results["new"].items():
        if not isinstance(t, torch.Tensor) or t.dim() == 0:
            continue
        mk = torch.zeros(t.shape, dtype=torch.bool)
        param = "weight" in key or "bias" in key
        jj = torch.tensor(sorted(cols))
        if param:
            if t.shape[0] == N:
                mk[jj] = True
        elif t.dim() == 2:
            if t.shape[1] == N:
                mk[:, jj] = True
            if t.shape[0] in rows:
                mk[torch.tensor(sorted(rows[t.shape[0]]))] = True
        if mk.any():
            masks[key] = mk
    rerun = {"metrics": []}
    verdict, note2 = judge(ctx, rerun, results, dtype, "ok", masks=masks)
    unmasked = {"metrics": []}
    v_plain, _ = judge(ctx, unmasked, results, dtype, "ok")
    info["masked_metrics"] = [m for m in rerun["metrics"] if "masked" in m or not m["ok"]]
    what += f"; {len(cols)} columns, {sum(len(r) for r in rows.values())} rows left out"
    if v_plain != "WRONG":
        what += " (the re-run itself was not WRONG)"
    if verdict == "ok":
        return "KINK", (note + "; " + what + ": the rest agrees").strip("; ")
    bad = [m["key"] for m in rerun["metrics"] if not m["ok"]]
    return "WRONG", (note + "; " + what + f": still off without them: {bad[:4]}").strip("; ")


def judge(ctx, rec, results, dtype, verdict, masks=None):
    """Fills rec["metrics"] (kgen's values against exact's, eager's error beside); returns the
    verdict and a note."""
    torch = ctx.torch
    new, eager, exact, ctrl = results["new"], results.get("eager", {}), results["exact"], results.get("control")
    rec["metrics"] = []
    for key in new:
        if key not in exact and not key.startswith("eq."):
            continue
        m = compare(torch, key, new[key], eager.get(key), exact.get(key), dtype or ctx.dtype,
                    c=None if ctrl is None else ctrl.get(key), mask=None if masks is None else masks.get(key))
        rec["metrics"].append(m)
        if not m["ok"]:
            verdict = "WRONG"
    # (a value whose exact result is ~0 beside the case's others, e.g. a Linear bias's gradient
    # through training-mode BatchNorm: its errors are rounding noise, eager's too; said beside it)
    top = max([m.get("scale", 0.0) for m in rec["metrics"]] + [0.0])
    for m in rec["metrics"]:
        if "scale" in m and m["scale"] < 1e-6 * top:
            m["note"] = (m.get("note", "") + " exact ~0 (noise)").strip()
    note = ""
    missing = [k for k in exact if k not in new]
    if missing:
        note = f"kgen yielded no {missing}"
        verdict = "WRONG"
    return verdict, note


def _exc(e):
    tb = traceback.format_exception(type(e), e, e.__traceback__)
    return {"type": type(e).__name__, "message": str(e)[:1500], "traceback": "".join(tb)[-4000:]}


def _cuda_broken(torch):
    try:
        torch.cuda.synchronize()
        return False
    except Exception:  # noqa: BLE001
        return True


# ---------------------------------------------------------------------------------------------
# Scenarios. Each is f(ctx, role) -> {name: tensor}; registered by a thin case that runs the trio.

CASES_BY_FN = {}   # a scenario -> its case's entry


def trio_case(name, roles=TRIO, **kw):
    def deco(scn):
        @case(name, **kw)
        def run(ctx):
            return run_trio(ctx, scn, roles=roles)
        CASES_BY_FN[scn] = CASES[name]
        return scn
    return deco


def train_backward(ctx, m, role, x, seed=7):
    y = m(x)
    g = ctx.out_grad(y, seed)
    y.backward(g)
    return y


@trio_case("basic_train", dtypes=("float32", "bfloat16"))
def s_basic_train(ctx, role):
    m = ctx.make(role).train()
    x = ctx.x(role, rg=True)
    y = train_backward(ctx, m, role, x)
    return {"out": y, "dx": x.grad, **grads(m), **state(m)}


@trio_case("eval_no_grad")
def s_eval_no_grad(ctx, role):
    m = ctx.make(role).eval()
    with ctx.torch.no_grad():
        return {"out": m(ctx.x(role))}


@trio_case("inference_mode_train_mode")
def s_inference_mode(ctx, role):
    m = ctx.make(role).train()
    with ctx.torch.inference_mode():
        y = m(ctx.x(role))
        y2 = m(ctx.x(role, seed=2))
    return {"out": y.clone(), "out2": y2.clone(), **state(m)}


@trio_case("inference_mode_eval")
def s_inference_mode_eval(ctx, role):
    m = ctx.make(role).eval()
    with ctx.torch.inference_mode():
        return {"out": m(ctx.x(role)).clone()}


@trio_case("grad_output_noncontiguous")
def s_grad_noncontig(ctx, role):
    m = ctx.make(role).train()
    x = ctx.x(role, rg=True)
    y = m(x)
    g = ctx.randn(y.shape[1], y.shape[0], seed=7).to(y.dtype).t()
    y.backward(g)
    return {"out": y, "dx": x.grad, **grads(m)}


@trio_case("grad_output_expanded_sum")
def s_grad_expanded(ctx, role):
    m = ctx.make(role).train()
    x = ctx.x(role, rg=True)
    y = m(x)
    (y.sum() * 0.01 + (y * ctx.randn(1, y.shape[1], seed=3).to(y.dtype)).mean()).backward()
    return {"out": y, "dx": x.grad, **grads(m)}


@trio_case("double_forward_one_backward", dtypes=("float32", "bfloat16"))
def s_double_forward(ctx, role):
    m = ctx.make(role).train()
    x1, x2 = ctx.x(role, seed=1, rg=True), ctx.x(role, seed=2, rg=True)
    y1, y2 = m(x1), m(x2)
    ((y1 * ctx.out_grad(y1, 7)).sum() + (y2 * ctx.out_grad(y2, 8)).sum()).backward()
    return {"out1": y1, "out2": y2, "dx1": x1.grad, "dx2": x2.grad, **grads(m), **state(m)}


@trio_case("two_forwards_backward_in_reverse_order")
def s_reverse_backward(ctx, role):
    m = ctx.make(role).train()
    x1, x2 = ctx.x(role, seed=1, rg=True), ctx.x(role, seed=2, rg=True)
    y1 = m(x1)
    y2 = m(x2[:100])
    y2.backward(ctx.out_grad(y2, 8))
    g2 = {k: v.clone() for k, v in grads(m, "grad2.").items()}
    y1.backward(ctx.out_grad(y1, 7))
    return {"out1": y1, "out2": y2, "dx1": x1.grad, "dx2": x2.grad, **g2, **grads(m)}


@trio_case("retain_graph_backward_twice")
def s_retain(ctx, role):
    m = ctx.make(role).train()
    x = ctx.x(role, rg=True)
    y = m(x)
    g = ctx.out_grad(y)
    y.backward(g, retain_graph=True)
    first = {k: v.clone() for k, v in grads(m, "grad1.").items()}
    y.backward(g * 0.5)
    return {"out": y, "dx": x.grad, **first, **grads(m)}


@trio_case("input_grad_only_params_frozen")
def s_input_only(ctx, role):
    m = ctx.make(role).train()
    for p in m.parameters():
        p.requires_grad_(False)
    x = ctx.x(role, rg=True)
    y = m(x)
    (dx,) = ctx.torch.autograd.grad(y, x, ctx.out_grad(y))
    return {"out": y, "dx": dx, **state(m)}


@trio_case("param_grads_only")
def s_params_only(ctx, role):
    m = ctx.make(role).train()
    y = train_backward(ctx, m, role, ctx.x(role))
    return {"out": y, **grads(m)}


@trio_case("partly_frozen_params")
def s_partly_frozen(ctx, role):
    m = ctx.make(role).train()
    ctx.linears(m)[0].weight.requires_grad_(False)
    x = ctx.x(role, rg=True)
    y = train_backward(ctx, m, role, x)
    return {"out": y, "dx": x.grad, **grads(m)}


@trio_case("double_backward_create_graph")
def s_double_backward(ctx, role):
    m = ctx.make(role).train()
    x = ctx.x(role, rg=True)
    y = m(x)
    (dx,) = ctx.torch.autograd.grad(y, x, ctx.out_grad(y), create_graph=True)
    (dx.square().sum()).backward()
    return {"out": y, "dx": dx, **grads(m)}


@trio_case("checkpoint_nonreentrant")
def s_ckpt_nr(ctx, role):
    m = ctx.make(role).train()
    x = ctx.x(role, rg=True)
    y = ctx.torch.utils.checkpoint.checkpoint(m, x, use_reentrant=False)
    y.backward(ctx.out_grad(y))
    return {"out": y, "dx": x.grad, **grads(m), **state(m)}


@trio_case("checkpoint_reentrant")
def s_ckpt_r(ctx, role):
    m = ctx.make(role).train()
    x = ctx.x(role, rg=True)
    y = ctx.torch.utils.checkpoint.checkpoint(m, x, use_reentrant=True)
    y.backward(ctx.out_grad(y))
    return {"out": y, "dx": x.grad, **grads(m), **state(m)}


def other_params(ctx, m, role):
    return {n: (p.detach() * 0.5 + ctx.like(p, 100 + i, role, 0.01)).requires_grad_()
            for i, (n, p) in enumerate(m.named_parameters())}


@trio_case("functional_call_other_params")
def s_functional_call(ctx, role):
    torch = ctx.torch
    m = ctx.make(role).train()
    x = ctx.x(role)
    params = other_params(ctx, m, role)
    y = torch.func.functional_call(m, params, (x,))
    y.backward(ctx.out_grad(y))
    out = {"out": y, **{"grad_other." + n: p.grad for n, p in params.items()}}
    m.eval()
    with torch.no_grad():
        out["own_after"] = m(x)
        out["other_after"] = torch.func.functional_call(m, params, (x,))
    return out


@trio_case("func_grad_over_functional_call")
def s_func_grad(ctx, role):
    torch = ctx.torch
    m = ctx.make(role).train(not ctx.has_bn)   # (BatchNorm's count, updated in place, is refused by grad)
    x = ctx.x(role)
    params = {n: p.detach() for n, p in m.named_parameters()}
    g = torch.func.grad(lambda p: torch.func.functional_call(m, p, (x,)).square().mean())(params)
    return {"grad." + n: v for n, v in g.items()}


@trio_case("vmap_ensemble_eval")
def s_vmap_ensemble(ctx, role):
    torch = ctx.torch
    ms = [ctx.make(role, seed=s).eval() for s in (0, 1)]
    params, buffers = torch.func.stack_module_state(ms)
    base = copy.deepcopy(ms[0]).to("meta")

    def f(p, b, x):
        return torch.func.functional_call(base, (p, b), (x,))
    with torch.no_grad():
        y = torch.func.vmap(f, in_dims=(0, 0, None))(params, buffers, ctx.x(role))
    return {"out": y}


@trio_case("vmap_over_rows_eval")
def s_vmap_rows(ctx, role):
    torch = ctx.torch
    m = ctx.make(role).eval()
    with torch.no_grad():
        y = torch.func.vmap(lambda r: m(r.unsqueeze(0)).squeeze(0))(ctx.x(role, batch=64))
    return {"out": y}


# --- optimizers ---

def opt_loop(ctx, role, make_opt, steps=5, clip=None, accumulate=1, seed0=10):
    torch = ctx.torch
    m = ctx.make(role).train()
    opt = make_opt(m.parameters(), role)
    out = {}
    for step in range(steps):
        opt.zero_grad(set_to_none=(step % 2 == 0))
        for micro in range(accumulate):
            x = ctx.x(role, seed=seed0 + 10 * step + micro)
            y = m(x)
            t = ctx.randn(*y.shape, seed=99).to(y.dtype)
            loss = (y - t).square().mean() / accumulate
            loss.backward()
        if clip is not None:
            out[f"eq_free.norm{step}"] = torch.nn.utils.clip_grad_norm_(m.parameters(), clip)
        opt.step()
        out[f"loss{step}"] = loss.detach()
    out.update(state(m))
    return out


def _opt(kind, **kw):
    def make(params, role):
        torch = __import__("torch")
        cls = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[kind]
        args = dict(kw)
        if role == "exact" and args.get("fused"):
            args.pop("fused")   # (fp64 fused kernels exist on CUDA; not on every build: the plain loop)
        return cls(params, **args)
    return make


for _name, _kind, _kw in [
    ("opt_sgd_momentum", "sgd", dict(lr=0.05, momentum=0.9)),
    ("opt_adam_foreach", "adam", dict(lr=1e-3, eps=1e-6, foreach=True)),
    ("opt_adam_fused", "adam", dict(lr=1e-3, eps=1e-6, fused=True)),
    ("opt_adamw_foreach", "adamw", dict(lr=1e-3, eps=1e-6, weight_decay=0.01, foreach=True)),
    ("opt_adamw_fused", "adamw", dict(lr=1e-3, eps=1e-6, weight_decay=0.01, fused=True)),
]:
    def _make_scn(kind=_kind, kw=_kw):
        return lambda ctx, role: opt_loop(ctx, role, _opt(kind, **kw))
    trio_case(_name, dtypes=("float32", "bfloat16") if _name == "opt_adamw_fused" else ("float32",))(_make_scn())


@trio_case("grad_accumulation_3_micro")
def s_accum(ctx, role):
    return opt_loop(ctx, role, _opt("sgd", lr=0.05, momentum=0.9), steps=3, accumulate=3)


@trio_case("clip_grad_norm")
def s_clip(ctx, role):
    out = opt_loop(ctx, role, _opt("sgd", lr=0.5), steps=3, clip=0.05)
    return {k.replace("eq_free.", ""): v for k, v in out.items()}


@trio_case("zero_grad_keep_then_none")
def s_zero_grad(ctx, role):
    m = ctx.make(role).train()
    opt = ctx.torch.optim.SGD(m.parameters(), lr=0.1)
    out = {}
    for step, none in enumerate((False, False, True)):
        opt.zero_grad(set_to_none=none)
        train_backward(ctx, m, role, ctx.x(role, seed=20 + step))
        out.update({f"{k}@{step}": v.clone() for k, v in grads(m).items()})
        opt.step()
    return {**out, **state(m)}


def amp_loop(ctx, role, dtype_name, scaler_on, steps=5):
    torch = ctx.torch
    m = ctx.make(role).train()
    opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
    enabled = role != "exact"
    scaler = torch.amp.GradScaler(ctx.dev.type, enabled=enabled and scaler_on)
    out = {}
    for step in range(steps):
        opt.zero_grad()
        with torch.autocast(ctx.dev.type, dtype=getattr(torch, dtype_name), enabled=enabled):
            y = m(ctx.x(role, seed=30 + step))
        t = ctx.randn(*y.shape, seed=99).to(torch.float64 if role == "exact" else torch.float32)
        loss = (y.to(t.dtype) - t).square().mean()
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        scaler.step(opt)
        scaler.update()
        out[f"loss{step}"] = loss.detach()
        if role != "exact":
            out[f"eq.scale{step}"] = scaler.get_scale() if scaler_on else 1.0
            out[f"eq.out_dtype{step}"] = float(torch.finfo(y.dtype).bits)
    out.update(state(m))
    return out


@trio_case("amp_fp16_autocast_gradscaler", files=HALF_FILES)
def s_amp_fp16(ctx, role):
    return amp_loop(ctx, role, "float16", True)


@trio_case("amp_bf16_autocast_train", files=BF16_MOVE_FILES)
def s_amp_bf16(ctx, role):
    return amp_loop(ctx, role, "bfloat16", False, steps=3)


@trio_case("autocast_fp16_inference", files=FP16_INFER_FILES)
def s_autocast_infer(ctx, role):
    torch = ctx.torch
    m = ctx.make(role).eval()
    with torch.no_grad(), torch.autocast(ctx.dev.type, dtype=torch.float16, enabled=role != "exact"):
        y1 = m(ctx.x(role))
        y2 = m(ctx.x(role, batch=ctx.BIG, seed=2))
    return {"out": y1, "out_big": y2}


# --- weight edits between calls ---

def edit_case(name, edit, train_after=True, dtypes=("float32",)):
    """A forward at ctx.BIG rows (eval, no_grad: the kept split of W, where the GEMM keeps one) and at
    ctx.B, the edit, the same forwards again, then a training forward + backward."""
    def scn(ctx, role):
        torch = ctx.torch
        m = ctx.make(role).eval()
        xb, xs = ctx.x(role, batch=ctx.BIG, seed=1), ctx.x(role, seed=2)
        out = {}
        with torch.no_grad():
            out["before_big"], out["before"] = m(xb), m(xs)
            m(xb)
        m = edit(ctx, m, role) or m
        with torch.no_grad():
            out["after_big"], out["after"] = m(xb), m(xs)
            out["after_big2"] = m(xb)
        if train_after:
            m.train()
            x = ctx.x(role, seed=3, rg=True)
            out["train_out"] = train_backward(ctx, m, role, x)
            out["dx"] = x.grad
            out.update(grads(m))
        return out
    trio_case(name, dtypes=dtypes)(scn)


def _e_copy(ctx, m, role):
    with ctx.torch.no_grad():
        for i, lin in enumerate(ctx.linears(m)):
            lin.weight.copy_(ctx.like(lin.weight, 40 + i, role, 0.03))


def _e_data_assign(ctx, m, role):
    for i, lin in enumerate(ctx.linears(m)):
        lin.weight.data = ctx.like(lin.weight, 40 + i, role, 0.03)


def _e_data_mul(ctx, m, role):
    for lin in ctx.linears(m):
        lin.weight.data.mul_(0.5)


def _e_data_row(ctx, m, role):
    for lin in ctx.linears(m):
        lin.weight.data[3] *= -1.0
        lin.weight.data[5, 0] += 0.25


def _e_load_state_dict(ctx, m, role):
    sd = ctx.base_state(seed=5)
    m.load_state_dict({k: (v.double() if role == "exact" else v.to(ctx.dtype)) if v.is_floating_point() else v
                       for k, v in sd.items()})


def _e_param_replace(ctx, m, role):
    for i, lin in enumerate(ctx.linears(m)):
        lin.weight = ctx.torch.nn.Parameter(ctx.like(lin.weight, 40 + i, role, 0.03))


def _e_set(ctx, m, role):
    with ctx.torch.no_grad():
        for i, lin in enumerate(ctx.linears(m)):
            lin.weight.set_(ctx.like(lin.weight, 40 + i, role, 0.03))


def _e_add_inplace(ctx, m, role):
    with ctx.torch.no_grad():
        for lin in ctx.linears(m):
            lin.weight.add_(1e-3)


def _e_requires_grad_toggle(ctx, m, role):
    for lin in ctx.linears(m):
        lin.weight.requires_grad_(False)
        lin.weight.data.mul_(0.5)
        lin.weight.requires_grad_(True)


def _e_swap_between_instances(ctx, m, role):
    """The Linear weights of m and of a second instance (used once) swapped: both storages were seen."""
    other = ctx.make(role, seed=3).eval()
    with ctx.torch.no_grad():
        other(ctx.x(role, batch=ctx.BIG, seed=1))
    for a, b in zip(ctx.linears(m), ctx.linears(other)):
        a.weight, b.weight = b.weight, a.weight
    return m


def _e_half_roundtrip_values(ctx, m, role):
    """W rounded to fp16 and back in place (an exact-representable change of most elements' low bits)."""
    with ctx.torch.no_grad():
        for lin in ctx.linears(m):
            lin.weight.copy_(lin.weight.half().to(lin.weight.dtype))


for _n, _e in [("edit_copy_no_grad", _e_copy), ("edit_data_assign", _e_data_assign),
               ("edit_data_mul", _e_data_mul), ("edit_data_one_row", _e_data_row),
               ("edit_load_state_dict_after_forward", _e_load_state_dict),
               ("edit_parameter_replaced", _e_param_replace), ("edit_set_", _e_set),
               ("edit_add_inplace_small", _e_add_inplace), ("edit_requires_grad_toggle_data_mul", _e_requires_grad_toggle),
               ("edit_weights_swapped_between_instances", _e_swap_between_instances),
               ("edit_fp16_rounding_in_place", _e_half_roundtrip_values)]:
    edit_case(_n, _e, dtypes=("float32", "bfloat16") if _n in ("edit_copy_no_grad", "edit_data_mul") else ("float32",))


@trio_case("edit_aba_values")
def s_aba(ctx, role):
    torch = ctx.torch
    m = ctx.make(role).eval()
    x = ctx.x(role, batch=ctx.BIG)
    lins = ctx.linears(m)
    a = [lin.weight.detach().clone() for lin in lins]
    b = [ctx.like(lin.weight, 50 + i, role, 0.03) for i, lin in enumerate(lins)]
    out = {}
    with torch.no_grad():
        for i, vals in enumerate((a, b, a, b, a)):
            for lin, v in zip(lins, vals):
                lin.weight.data.copy_(v)
            out[f"out{i}"] = m(x)
    return out


@trio_case("tied_weights_two_instances")
def s_tied(ctx, role):
    torch = ctx.torch
    m1 = ctx.make(role).train()
    m2 = ctx.make(role, seed=4).eval()
    for a, b in zip(ctx.linears(m1), ctx.linears(m2)):
        b.weight = a.weight
    opt = torch.optim.SGD(m1.parameters(), lr=0.1)
    x = ctx.x(role, batch=ctx.BIG, seed=5)
    out = {}
    for step in range(3):
        with torch.no_grad():
            out[f"m2_{step}"] = m2(x)
        opt.zero_grad()
        train_backward(ctx, m1, role, ctx.x(role, seed=60 + step))
        opt.step()
    with torch.no_grad():
        out["m2_end"] = m2(x)
    return out


@trio_case("ema_foreach_lerp")
def s_ema(ctx, role):
    torch = ctx.torch
    m = ctx.make(role).train()
    ema = copy.deepcopy(m).eval()
    for p in ema.parameters():
        p.requires_grad_(False)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3, eps=1e-6)
    x = ctx.x(role, batch=ctx.BIG, seed=5)
    out = {}
    for step in range(4):
        opt.zero_grad()
        y = m(ctx.x(role, seed=70 + step))
        (y.square().mean()).backward()
        opt.step()
        torch._foreach_lerp_(list(ema.parameters()), list(p.detach() for p in m.parameters()), 0.25)
        with torch.no_grad():
            out[f"ema{step}"] = ema(x)
    return out


@trio_case("train_steps_interleaved_with_eval")
def s_interleave(ctx, role):
    torch = ctx.torch
    m = ctx.make(role)
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.5)
    x = ctx.x(role, batch=ctx.BIG, seed=5)
    out = {}
    for step in range(4):
        m.eval()
        with torch.no_grad():
            out[f"eval{step}"] = m(x)
        m.train()
        opt.zero_grad()
        train_backward(ctx, m, role, ctx.x(role, batch=ctx.BIG if step % 2 else ctx.B, seed=80 + step))
        opt.step()
    return {**out, **state(m)}


# --- moves and copies ---

@trio_case("deepcopy_after_forward")
def s_deepcopy(ctx, role):
    torch = ctx.torch
    m = ctx.make(role).eval()
    x = ctx.x(role, batch=ctx.BIG)
    with torch.no_grad():
        y0 = m(x)
        m2 = copy.deepcopy(m)
        for lin in ctx.linears(m):
            lin.weight.mul_(0.5)
        return {"before": y0, "edited": m(x), "copy": m2(x), "edited_again": m(x)}


@trio_case("torch_save_load_module")
def s_save_load(ctx, role):
    torch = ctx.torch
    m = ctx.make(role).eval()
    x = ctx.x(role)
    with torch.no_grad():
        y0 = m(x)
    buf = io.BytesIO()
    torch.save(m, buf)
    buf.seek(0)
    m2 = torch.load(buf, weights_only=False)
    sd = io.BytesIO()
    torch.save(m.state_dict(), sd)
    sd.seek(0)
    m3 = ctx.make(role, seed=9).eval()
    m3.load_state_dict(torch.load(sd))
    with torch.no_grad():
        return {"before": y0, "loaded_module": m2(x), "loaded_state": m3(x)}


def _to16(ctx, m, role, name):
    dt = getattr(ctx.torch, name)
    return m.to(dt).double() if role == "exact" else m.to(dt)


def _x16(ctx, x, role, name):
    x = x.to(getattr(ctx.torch, name))
    return x.double() if role == "exact" else x


def _roundtrip(ctx, role, name, via_method):
    torch = ctx.torch
    m = ctx.make(role).train()
    x = ctx.x(role)
    out = {"first": train_backward(ctx, m, role, x.clone().requires_grad_())}
    m.zero_grad(set_to_none=True)
    if via_method and role != "exact":
        m = m.half() if name == "float16" else m.bfloat16()
    else:
        m = _to16(ctx, m, role, name)
    xs = _x16(ctx, x, role, name).requires_grad_()
    y = m(xs)
    y.backward(ctx.out_grad(y).to(y.dtype))
    out.update({"out16": y, "dx16": xs.grad, **grads(m, "grad16.")})
    m.zero_grad(set_to_none=True)
    if role != "exact":
        m = m.float()
    with torch.no_grad():
        out["back_fp32"] = m(x)
    out.update(state(m))
    return out


@case("half_and_back", files=HALF_FILES)
def c_half(ctx):
    return run_trio(ctx, lambda c, r: _roundtrip(c, r, "float16", True), dtype=ctx.torch.float16)


@case("bfloat16_and_back", files=BF16_MOVE_FILES)
def c_bf16(ctx):
    return run_trio(ctx, lambda c, r: _roundtrip(c, r, "bfloat16", False), dtype=ctx.torch.bfloat16)


@trio_case("cpu_then_cuda_roundtrip", cuda=True)
def s_cpu_roundtrip(ctx, role):
    torch = ctx.torch
    m = ctx.make(role).train()
    x = ctx.x(role, rg=True)
    out = {"first": train_backward(ctx, m, role, x)}
    m = m.cpu()
    m = m.cuda()
    x2 = ctx.x(role, seed=2, rg=True)
    out["after"] = train_backward(ctx, m, role, x2, seed=8)
    out["dx"] = x2.grad
    out.update(grads(m))
    out.update(state(m))
    return out


@trio_case("cpu_forward", cuda=True)
def s_cpu_forward(ctx, role):
    m = ctx.make(role).eval().cpu()
    with ctx.torch.no_grad():
        return {"out": m(ctx.x(role).cpu())}


@trio_case("second_instance_interleaved")
def s_second(ctx, role):
    torch = ctx.torch
    m1, m2 = ctx.make(role).eval(), ctx.make(role, seed=3).eval()
    x = ctx.x(role, batch=ctx.BIG)
    with torch.no_grad():
        return {"a1": m1(x), "b1": m2(x), "a2": m1(x), "b2": m2(x)}


@trio_case("eval_train_switches_after_steps")
def s_eval_train(ctx, role):
    torch = ctx.torch
    m = ctx.make(role).train()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    for step in range(3):
        opt.zero_grad()
        train_backward(ctx, m, role, ctx.x(role, seed=90 + step))
        opt.step()
    x = ctx.x(role, seed=4)
    out = {}
    m.eval()
    with torch.no_grad():
        out["eval1"] = m(x)
    m.train()
    with torch.no_grad():
        out["train"] = m(x)
    m.eval()
    with torch.no_grad():
        out["eval2"] = m(x)
    return {**out, **state(m)}


# --- inputs ---

def input_case(name, make_x, train=True, **kw):
    def scn(ctx, role):
        m = ctx.make(role).train(train)
        x = make_x(ctx, role)
        if train:
            x.requires_grad_()
            y = m(x)
            y.backward(ctx.out_grad(y))
            return {"out": y, "dx": x.grad, **grads(m), **state(m)}
        with ctx.torch.no_grad():
            return {"out": m(x)}
    trio_case(name, **kw)(scn)


def _leaf(f):
    """x made by f, a view: a leaf copy that keeps its strides (x.grad is then the view's layout)."""
    def make(ctx, role):
        base = f(ctx, role)
        return base.detach()
    return make


input_case("x_transposed_view", _leaf(lambda c, r: c.randn(c.K, c.B, seed=1).to(c.dt(r)).t()),
           dtypes=("float32", "bfloat16"))
input_case("x_row_stride_2", _leaf(lambda c, r: c.randn(2 * c.B, c.K, seed=1).to(c.dt(r))[::2]))
input_case("x_column_stride_2", _leaf(lambda c, r: c.randn(c.B, 2 * c.K, seed=1).to(c.dt(r))[:, ::2]))
input_case("x_offset_by_one_element", _leaf(
    lambda c, r: c.randn(c.B * c.K + 1, seed=1).to(c.dt(r))[1:].view(c.B, c.K)))
input_case("x_expanded_row", _leaf(lambda c, r: (c.randn(1, c.K, seed=1) + 0.1 * c.randn(c.B, 1, seed=2)).to(c.dt(r))
                                   if c.has_bn else c.randn(1, c.K, seed=1).to(c.dt(r)).expand(c.B, c.K)))
input_case("x_expanded_stride0", _leaf(lambda c, r: c.randn(1, c.K, seed=1).to(c.dt(r)).expand(c.B, c.K)),
           train=False)
for _b in (1, 3, 777):
    input_case(f"x_batch_{_b}_train", lambda c, r, b=_b: c.x(r, batch=b, seed=3))
    input_case(f"x_batch_{_b}_eval", lambda c, r, b=_b: c.x(r, batch=b, seed=3), train=False)
input_case("x_batch_0_eval", lambda c, r: c.x(r, batch=0, seed=3), train=False)
input_case("x_3d_BTC", lambda c, r: c.randn(8, 16, c.K, seed=3).to(c.dt(r)))
input_case("x_3d_BTC_eval", lambda c, r: c.randn(8, 16, c.K, seed=3).to(c.dt(r)), train=False)
input_case("x_1d_single_sample_eval", lambda c, r: c.randn(c.K, seed=3).to(c.dt(r)), train=False)


@trio_case("forward_hook_on_model")
def s_hook_model(ctx, role):
    m = ctx.make(role).train()
    seen = []
    m.register_forward_hook(lambda mod, inp, out: seen.append(out.detach().clone()))
    x = ctx.x(role, rg=True)
    y = train_backward(ctx, m, role, x)
    return {"out": y, "hooked": seen[0], "dx": x.grad, **grads(m)}


@trio_case("forward_hook_on_submodule")
def s_hook_sub(ctx, role):
    m = ctx.make(role).train()
    seen = []
    ctx.linears(m)[0].register_forward_hook(lambda mod, inp, out: seen.append(out.detach().clone()))
    y = train_backward(ctx, m, role, ctx.x(role))
    return {"out": y, "hooked": seen[0], **grads(m)}


@trio_case("weight_norm_parametrization")
def s_weight_norm(ctx, role):
    m = ctx.make(role).train()
    for lin in ctx.linears(m):
        ctx.torch.nn.utils.parametrizations.weight_norm(lin)
    x = ctx.x(role, rg=True)
    y = train_backward(ctx, m, role, x)
    return {"out": y, "dx": x.grad, **grads(m)}


@trio_case("x_bf16_into_fp32_module")
def s_x_bf16(ctx, role):
    m = ctx.make(role).eval()
    with ctx.torch.no_grad():
        return {"out": m(ctx.x("new").to(ctx.torch.bfloat16))}


@trio_case("x_fp64_into_fp32_module")
def s_x_fp64(ctx, role):
    m = ctx.make(role).eval()
    with ctx.torch.no_grad():
        return {"out": m(ctx.x("new").double()) if role != "exact" else m(ctx.x("exact"))}


@trio_case("x_on_side_stream", cuda=True)
def s_stream(ctx, role):
    torch = ctx.torch
    m = ctx.make(role).train()
    x = ctx.x(role, rg=True)
    g = None
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        y = m(x)
        g = ctx.out_grad(y)
        y.backward(g)
        y2 = m(ctx.x(role, batch=ctx.BIG, seed=2))
    torch.cuda.current_stream().wait_stream(s)
    return {"out": y, "out_big": y2, "dx": x.grad, **grads(m), **state(m)}


@trio_case("x_made_on_side_stream_used_on_default", cuda=True)
def s_stream2(ctx, role):
    torch = ctx.torch
    m = ctx.make(role).eval()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        big = torch.randn(4096, 4096, device="cuda")   # (a slow producer)
        x = ctx.x(role, batch=ctx.BIG) + 0 * big[:ctx.BIG, :1].to(ctx.dt(role))
    torch.cuda.current_stream().wait_stream(s)
    with torch.no_grad():
        return {"out": m(x)}


# --- torch.compile and CUDA graphs (group "compile") ---

COMPILED = ("new", "control")


def compiled(ctx, role, m, **kw):
    """m compiled for the roles that compile (ModelNew, and the reference as the control), the same
    way (aot_eager in a dry run); m itself for exact and eager."""
    if role not in COMPILED:
        return m
    return ctx.torch.compile(m, **({"backend": "aot_eager", **{k: v for k, v in kw.items() if k != "mode"}}
                                   if ctx.dry else kw))


def compiled_train(ctx, role, **compile_kw):
    torch = ctx.torch
    m = ctx.make(role).train()
    fn = compiled(ctx, role, m, **compile_kw)
    opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
    out = {}
    for step in range(4):
        if role in COMPILED and compile_kw.get("mode") == "reduce-overhead" and not ctx.dry:
            torch.compiler.cudagraph_mark_step_begin()
        opt.zero_grad()
        x = ctx.x(role, seed=110 + step, rg=True)
        y = fn(x)
        y.backward(ctx.out_grad(y, 7 + step))
        out[f"out{step}"] = y.detach().clone()
        # (cloned: under reduce-overhead, x.grad is a CUDA graph's output, overwritten by the next
        # step's replay; round 1 kept it, and reading it after raised torch's 'accessing tensor
        # output of CUDAGraphs that has been overwritten', the compiled reference's too)
        out[f"dx{step}"] = x.grad.clone()
        opt.step()
    return {**out, **state(m)}


trio_case("compile_default_train", group="compile", budget=200, roles=WITH_CONTROL)(
    lambda c, r: compiled_train(c, r))
trio_case("compile_reduce_overhead_train", group="compile", budget=200, roles=WITH_CONTROL)(
    lambda c, r: compiled_train(c, r, mode="reduce-overhead"))


@trio_case("compile_dynamic_batches_eval", group="compile", budget=150, roles=WITH_CONTROL)
def s_compile_dynamic(ctx, role):
    torch = ctx.torch
    m = ctx.make(role).eval()
    fn = compiled(ctx, role, m, dynamic=True)
    out = {}
    with torch.no_grad():
        for b in (128, 300, 777):
            out[f"b{b}"] = fn(ctx.x(role, batch=b, seed=b))
        with torch.no_grad():
            for lin in ctx.linears(m):
                lin.weight.mul_(0.5)
        out["edited"] = fn(ctx.x(role, batch=300, seed=300))
    return out


@trio_case("compile_fullgraph_eval_weight_edits", group="compile", budget=150, roles=WITH_CONTROL)
def s_compile_edits(ctx, role):
    torch = ctx.torch
    m = ctx.make(role).eval()
    fn = compiled(ctx, role, m, fullgraph=True)
    x = ctx.x(role, batch=ctx.BIG)
    out = {}
    with torch.no_grad():
        out["first"] = fn(x)
        for lin in ctx.linears(m):
            lin.weight.data.mul_(0.5)
        out["data_mul"] = fn(x)
        for i, lin in enumerate(ctx.linears(m)):
            lin.weight.copy_(ctx.like(lin.weight, 40 + i, role, 0.03))
        out["copied"] = fn(x)
    return out


@trio_case("cuda_graph_forward_eval", group="compile", budget=90, cuda=True)
def s_graph_eval(ctx, role):
    torch = ctx.torch
    m = ctx.make(role).eval()
    static_x = ctx.x(role, batch=ctx.BIG).clone()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s), torch.no_grad():
        for _ in range(3):
            m(static_x)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(graph):
        static_y = m(static_x)
    out = {}
    static_x.copy_(ctx.x(role, batch=ctx.BIG, seed=2))
    graph.replay()
    out["replay_new_x"] = static_y.clone()
    with torch.no_grad():
        for lin in ctx.linears(m):
            lin.weight.mul_(0.5)
    graph.replay()
    out["replay_edited_w"] = static_y.clone()
    for lin in ctx.linears(m):
        lin.weight.data.add_(0.001)
    graph.replay()
    out["replay_data_edit"] = static_y.clone()
    return out


@trio_case("cuda_graph_train_step", group="compile", budget=90, cuda=True)
def s_graph_train(ctx, role):
    torch = ctx.torch
    m = ctx.make(role).train()
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    static_x = ctx.x(role, batch=ctx.BIG).clone()
    static_g = None
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):   # warm-up (moves BatchNorm's stats; the same in every role)
            opt.zero_grad(set_to_none=True)
            y = m(static_x)
            static_g = ctx.out_grad(y)
            y.backward(static_g)
    torch.cuda.current_stream().wait_stream(s)
    opt.zero_grad(set_to_none=True)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_y = m(static_x)
        static_y.backward(static_g)
    out = {}
    for step in range(3):
        static_x.copy_(ctx.x(role, batch=ctx.BIG, seed=120 + step))
        graph.replay()
        out[f"out{step}"] = static_y.detach().clone()
        out.update({f"{k}@{step}": v.clone() for k, v in grads(m).items()})
        opt.step()
    return {**out, **state(m)}


# ---------------------------------------------------------------------------------------------
# Worker process.

def load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def worker(args):
    import torch
    file_name = args.file
    files = Path(args.files_dir)
    ref_mod = load_module(str(files / "refs" / f"{file_name}.py"), f"usage_ref_{file_name}")
    new_mod = load_module(str(files / f"{file_name}.py"), f"usage_new_{file_name}")
    dev = torch.device("cpu" if args.dry_run else "cuda")
    new_cls = new_mod.ModelNew
    if args.dry_run:   # the kernels stubbed out: the reference's forward on ModelNew
        new_cls = type("ModelNewStub", (new_mod.ModelNew,), {"forward": new_mod._kgen_reference.Model.forward,
                                                             "__module__": new_mod.__name__})
        new_mod.ModelNewStub = new_cls   # (where pickle looks it up)
    torch.set_num_threads(1)
    log = open(args.log, "a", buffering=1)
    for name in args.cases.split(","):
        c = CASES[name]
        log.write(json.dumps({"event": "start", "case": name, "t": time.time()}) + "\n")
        rec = {"file": file_name, "case": name, "group": c["group"], "dtype": c["dtype"]}
        t0 = time.time()
        fatal = False
        if c["cuda"] and args.dry_run:
            rec.update(verdict="SKIP", note="needs CUDA (dry run)")
        else:
            try:
                ctx = Ctx(torch, file_name, ref_mod, new_mod, new_cls, dev, c["dtype"], args.dry_run)
                torch.manual_seed(0)
                rec.update(c["fn"](ctx))
            except Exception as e:  # noqa: BLE001
                rec.update(verdict="CRASH", note="the case itself raised (or CUDA broke)", errors={"case": _exc(e)})
                fatal = dev.type == "cuda" and _cuda_broken(torch)
        rec["seconds"] = round(time.time() - t0, 2)
        log.write(json.dumps({"event": "done", **rec}, default=str) + "\n")
        if fatal:
            log.write(json.dumps({"event": "fatal", "case": name}) + "\n")
            os._exit(3)
    log.write(json.dumps({"event": "worker_end"}) + "\n")


# ---------------------------------------------------------------------------------------------
# Orchestration.

def generate(files_dir, names):
    (files_dir / "refs").mkdir(parents=True, exist_ok=True)
    procs = {}
    for name in names:
        src, init = REFS[name]
        ref = files_dir / "refs" / f"{name}.py"
        ref.write_text(src + TAIL2.format(init=init))
        cmd = [sys.executable, "-c", "from kgen.cli import run; run()", "generate", str(ref),
               "-o", str(files_dir / f"{name}.py"), "--force"]
        procs[name] = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    for name, p in procs.items():
        out, _ = p.communicate(timeout=300)
        chose = [line for line in out.splitlines() if line.startswith(("chose", "wrote"))]
        lines.append(f"{name}: exit {p.returncode}; " + " | ".join(chose)[:400])
        if p.returncode != 0:
            lines.append(out[-2000:])
    return lines


def start_builds(files_dir, names, out_dir):
    procs = []
    for name in names:
        for dtype, autocast, fp32w in BUILDS[name]:
            code = ("import sys, torch; from kgen.check.loading import EmittedFile; "
                    f"EmittedFile(sys.argv[1], with_reference=False).build(torch.{dtype}, {autocast}, {fp32w})")
            log = out_dir / f"build_{name}_{dtype}{'_autocast' if autocast else ''}{'_fp32w' if fp32w else ''}.log"
            p = subprocess.Popen([sys.executable, "-c", code, str(files_dir / f"{name}.py")],
                                 stdout=open(log, "w"), stderr=subprocess.STDOUT)
            procs.append((name, dtype, autocast, fp32w, p, log, time.time()))
    return procs


def finish_builds(procs, limit):
    lines = []
    deadline = time.time() + limit
    for name, dtype, autocast, fp32w, p, log, t0 in procs:
        try:
            rc = p.wait(timeout=max(1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
            rc = "timeout"
        tail = log.read_text().strip()[-300:].replace("\n", " | ") if rc != 0 else ""
        lines.append(f"{name} {dtype} autocast={autocast} fp32_weight={fp32w}: rc {rc}, "
                     f"{time.time() - t0:.0f} s {tail}")
    return lines


# Every worker's CPU ops on one thread: round 1's ten workers of torch's 16 OpenMP threads each on
# 16 cores spent most of each case in spinning barriers (the comparisons' CPU ops; 6 processes x 2
# threads on 2 cores ran such a loop 4x slower than 6 x 1). Inductor compiles in its own process
# (no pool of 16 subprocesses per compiling worker).
BUILDS_DONE = [0.0]   # when the up-front builds ended (inf while they run)
WORKER_ENV = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", TORCHINDUCTOR_COMPILE_THREADS="1")

# Seconds a case took in round 1 (ten contended workers), to balance the chunks of a file's cases
# among its workers (longest first onto the least loaded); a case not named: 3.
EST = {"basic_train": 10, "checkpoint_nonreentrant": 20, "checkpoint_reentrant": 8,
       "double_forward_one_backward": 12, "two_forwards_backward_in_reverse_order": 11,
       "retain_graph_backward_twice": 6, "functional_call_other_params": 7, "zero_grad_keep_then_none": 6,
       "edit_*": 9.5, "edit_aba_values": 6, "tied_weights_two_instances": 5, "ema_foreach_lerp": 5,
       "train_steps_interleaved_with_eval": 6, "deepcopy_after_forward": 4.6, "half_and_back": 7,
       "bfloat16_and_back": 6, "cpu_then_cuda_roundtrip": 5, "second_instance_interleaved": 4,
       "inference_mode_train_mode": 4, "grad_output_*": 5, "x_*_eval": 1, "x_3d*": 0.1, "x_1d*": 0.1,
       "cpu_forward": 0.3, "double_backward_create_graph": 0.5, "func_grad_*": 0.3,
       # compile group (with the compiled reference's control: about twice round 1's)
       "cuda_graph_train_step": 40, "cuda_graph_forward_eval": 4, "compile_default_train": 90,
       "compile_reduce_overhead_train": 90, "compile_dynamic_batches_eval": 30,
       "compile_fullgraph_eval_weight_edits": 16}


def est(name):
    base = name.split("@")[0]
    for pat, v in EST.items():
        if fnmatch.fnmatch(base, pat):
            return v
    return 3.0


def split_cases(cases, k):
    """cases in k chunks of about equal estimated time, each in the cases' order."""
    if k <= 1 or len(cases) <= 1:
        return [list(cases)]
    loads = [[0.0, []] for _ in range(min(k, len(cases)))]
    for name in sorted(cases, key=est, reverse=True):
        slot = min(loads, key=lambda s: s[0])
        slot[0] += est(name)
        slot[1].append(name)
    return [sorted(s[1], key=cases.index) for s in loads if s[1]]


class Worker:
    def __init__(self, args, file_name, group, cases, out_dir, index):
        self.args, self.file, self.group, self.out_dir = args, file_name, group, out_dir
        self.todo = list(cases)
        self.label = f"{file_name}_{group}{index}"
        self.log = out_dir / f"worker_{self.label}.jsonl"
        self.read_pos = 0
        self.proc = None
        self.current = None   # (case, start time)
        self.records = []
        self.restarts = 0
        self.start()

    def start(self):
        if not self.todo:
            self.proc = None
            return
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--file", self.file, "--cases",
               ",".join(self.todo), "--log", str(self.log), "--files-dir", str(self.args.files_dir)]
        if self.args.dry_run:
            cmd.append("--dry-run")
        text = self.log.read_text() if self.log.exists() else ""
        if text and not text.endswith("\n"):
            with open(self.log, "a") as f:
                f.write("\n")
        err = open(self.out_dir / f"worker_{self.label}.stderr", "a")
        self.proc = subprocess.Popen(cmd, stdout=err, stderr=subprocess.STDOUT, start_new_session=True,
                                     env=WORKER_ENV)
        self.current = None
        self.started = time.time()

    def poll(self):
        """Reads new log lines; enforces the per-case budget; restarts after a death. Returns new records."""
        new = []
        if self.log.exists():
            with open(self.log) as f:
                f.seek(self.read_pos)
                chunk = f.read()
            complete = chunk[:chunk.rfind("\n") + 1]
            self.read_pos += len(complete)
            for line in complete.splitlines():
                try:
                    ev = json.loads(line)
                except ValueError:   # (a line a killed worker left half written)
                    continue
                if ev["event"] == "start":
                    self.current = (ev["case"], time.time())
                elif ev["event"] == "done":
                    ev.pop("event")
                    new.append(ev)
                    if ev["case"] in self.todo:
                        self.todo.remove(ev["case"])
                    self.current = None
        if self.proc is None:
            return new
        rc = self.proc.poll()
        if self.current is not None:
            name, t0 = self.current
            budget = CASES[name]["budget"] * (3 if self.args.dry_run else 1)
            # (the budget counts from the builds' end: a first case may wait for its build)
            t0 = max(t0, BUILDS_DONE[0])
            if rc is None and time.time() - t0 > budget:
                self._kill()
                new.append(self._lost(name, "TIMEOUT", f"past its budget of {budget} s"))
                self.start()
                return new
        if rc is not None:
            if self.current is not None:
                name = self.current[0]
                new.append(self._lost(name, "CRASH", f"worker exited with {rc} during the case"))
            elif self.todo and rc != 0:
                # died before starting a case (import error): the rest cannot run
                tail = (self.out_dir / f"worker_{self.label}.stderr").read_text()[-1500:]
                for name in self.todo:
                    new.append({"file": self.file, "case": name, "verdict": "CRASH",
                                "note": f"worker exited with {rc} before the case", "errors": {"worker": {"message": tail}}})
                self.todo = []
            self.proc = None
            if self.todo and self.restarts < 20:
                self.restarts += 1
                self.start()
        return new

    def _lost(self, name, verdict, note):
        if name in self.todo:
            self.todo.remove(name)
        self.current = None
        tail = (self.out_dir / f"worker_{self.label}.stderr").read_text()[-1500:]
        return {"file": self.file, "case": name, "group": self.group, "verdict": verdict, "note": note,
                "errors": {"worker_stderr_tail": {"message": tail}}}

    def _kill(self):
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
        self.proc = None

    def done(self):
        return self.proc is None and not self.todo


ORDER = ["WRONG", "ERROR", "CRASH", "TIMEOUT", "DIFFERS", "KINK", "CTRL", "REFUSED", "ok", "SKIP"]
# Refusals meant (kgen's own words for what it does not do): said so in the summaries.
EXPECTED = {"func_grad_over_functional_call": "no gradient under torch.func's transforms",
            "double_backward_create_graph": "first derivatives only",
            "cpu_forward": "runs on CUDA tensors"}


def write_summary(out_dir, header, records, pending):
    order = ORDER
    counts = {}
    for r in records:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    lines = list(header)
    lines.append("")
    lines.append("verdicts: " + ", ".join(f"{v} {counts[v]}" for v in order if v in counts)
                 + (f"; not run (deadline / pending): {pending}" if pending else ""))
    files = sorted({r["file"] for r in records})
    cases = list(dict.fromkeys(r["case"] for r in sorted(records, key=lambda r: list(CASES).index(r["case"])
                                                            if r["case"] in CASES else 10**6)))
    by = {(r["file"], r["case"]): r for r in records}
    width = max([len(c) for c in cases] + [10])
    lines.append("")
    lines.append(" " * width + "  " + "  ".join(f"{f[:14]:>14}" for f in files))
    for c in cases:
        row = []
        for f in files:
            r = by.get((f, c))
            cell = "" if r is None else r["verdict"]
            if r is not None and r["verdict"] == "ok" and r.get("note") == "both raise":
                cell = "ok(both raise)"
            row.append(f"{cell:>14}")
        lines.append(f"{c:<{width}}  " + "  ".join(row))
    lines.append("")
    lines.append("=== details of every case not plainly ok ===")
    for r in sorted(records, key=lambda r: (order.index(r["verdict"]) if r["verdict"] in order else 99, r["file"])):
        if r["verdict"] == "ok" and r.get("note") != "both raise" and not r.get("warnings"):
            continue
        if r["verdict"] == "SKIP":
            continue
        lines.append(f"--- {r['file']} / {r['case']}: {r['verdict']} ({r.get('seconds', '?')} s) {r.get('note', '')}")
        for m in r.get("metrics", []):
            if not m.get("ok"):
                lines.append(f"    {m['key']}: err {m.get('err', float('nan')):.3e} eager {m.get('eager_err', float('nan')):.3e}"
                             + (f" compiled-ref {m['ctrl_err']:.3e}" if "ctrl_err" in m else "")
                             + f" scale {m.get('scale', float('nan')):.3e} {m.get('note', '')}")
        if r.get("kink"):
            k = r["kink"]
            lines.append(f"    kink: flips kgen {k['flips_kgen']} eager {k['flips_eager']} in {k['forwards']} forwards; "
                         f"columns {k['columns']} rows {k['rows']}")
            for m in k.get("masked_metrics", [])[:8]:
                lines.append(f"      masked {m['key']} ({m.get('masked', 0)} left out): err {m.get('err', float('nan')):.3e} "
                             f"eager {m.get('eager_err', float('nan')):.3e} {'ok' if m.get('ok') else 'OFF'}")
        if r.get("t"):
            lines.append(f"    seconds: {r['t']}")
        for role, e in r.get("errors", {}).items():
            msg = (e.get("message") or "")[:600].replace("\n", " | ")
            lines.append(f"    {role} raised {e.get('type', '')}: {msg}")
            if role in ("new", "case") and e.get("traceback") and r["verdict"] != "ok":
                tb = [ln for ln in e["traceback"].splitlines() if ln.strip()][-8:]
                lines.extend("      " + ln[:200] for ln in tb)
        for w in r.get("warnings", []):
            lines.append(f"    new warned: {w[:300]}")
    (out_dir / "summary.txt").write_text("\n".join(lines) + "\n")
    # A short one (for a reply's 12 KB tail): counts, then a line per case not plainly ok (one for
    # the files where a case raised the same error), then the slowest cases.
    short = [lines[len(header) + 1], "(CTRL: the compiled reference fails the same way; KINK: off only where "
             "an output element's branch flipped against fp64's; REFUSED(expected): kgen's words for what it does not do)"]
    timed = sorted((r for r in records if r.get("seconds")), key=lambda r: -r["seconds"])[:6]
    short.append("slowest: " + ", ".join(f"{r['file']}/{r['case']} {r['seconds']:.0f} s {r.get('t', '')}" for r in timed)[:900])
    groups = {}
    for r in sorted(records, key=lambda r: (order.index(r["verdict"]) if r["verdict"] in order else 99,
                                            r["case"], r["file"])):
        if r["verdict"] in ("ok", "SKIP"):
            continue
        bad = [m for m in r.get("metrics", []) if not m.get("ok")]
        what = "; ".join(f"{m['key']} err {m.get('err', float('nan')):.2e} vs eager {m.get('eager_err', float('nan')):.2e}"
                         + (f" cref {m['ctrl_err']:.2e}" if "ctrl_err" in m else "")
                         + f"{' ' + m['note'] if m.get('note') else ''}" for m in bad[:3])
        err = r.get("errors", {}).get("new") or r.get("errors", {}).get("case") or next(iter(r.get("errors", {}).values()), None)
        verdict = r["verdict"]
        if verdict == "REFUSED" and r["case"] in EXPECTED and EXPECTED[r["case"]] in (err or {}).get("message", ""):
            verdict = "REFUSED(expected)"
        if err and not what:
            what = f"{err.get('type', '')}: {(err.get('message') or '')[:160]}".replace("\n", " | ")
            gkey = (verdict, r["case"], re.sub(r"\d+", "#", what), r.get("note", ""))
        else:
            gkey = (verdict, r["case"], r["file"], what)
        g = groups.setdefault(gkey, [verdict, r["case"], [], what, r.get("note", "")])
        g[2].append(r["file"])
    for verdict, case_name, fs, what, note in groups.values():
        fl = ",".join(fs) if len(fs) < len(files) else f"all {len(fs)}"
        short.append(f"{verdict:<8} {case_name:<36} [{fl}] {what} {note}"[:420])
    (out_dir / "summary_short.txt").write_text("\n".join(short) + "\n")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dry-run", action="store_true")
    p.add_argument("--list", action="store_true")
    p.add_argument("--only", action="append", default=[], help="case name glob (repeatable)")
    p.add_argument("--files", default=",".join(REFS), help="comma-separated reference names")
    p.add_argument("--groups", default="main,compile")
    p.add_argument("--deadline", type=float, default=float(os.environ.get("USAGE_DEADLINE", 330)),
                   help="seconds from start after which no case runs and the summary is written")
    p.add_argument("--build-limit", type=float, default=200)
    p.add_argument("--main-workers", type=int, default=2, help="worker processes per file for the main group")
    p.add_argument("--compile-workers", type=int, default=3, help="... for the compile group")
    p.add_argument("--no-overlap-builds", dest="overlap_builds", action="store_false",
                   help="builds first, then the workers (round 1's order)")
    p.add_argument("--out", default=os.environ.get("OUT", "/tmp/out"))
    # worker mode
    p.add_argument("--worker", action="store_true")
    p.add_argument("--file")
    p.add_argument("--cases")
    p.add_argument("--log")
    p.add_argument("--files-dir")
    args = p.parse_args()
    if args.worker:
        return worker(args)
    names = [n for n in args.files.split(",") if n]
    groups = args.groups.split(",")
    if args.list:
        for n in names:
            cs = cases_for(n, args.only, groups)
            print(f"{n}: {len(cs)} cases: {', '.join(cs)}")
        return
    start = time.time()
    out_dir = Path(args.out) / "usage"
    out_dir.mkdir(parents=True, exist_ok=True)
    args.files_dir = str(out_dir / "files")
    files_dir = Path(args.files_dir)
    header = [f"usage probe: {'DRY RUN (CPU, kernels stubbed)' if args.dry_run else 'GPU'}; files {names}; "
              f"factor {FACTOR:g}; started {time.strftime('%Y-%m-%d %H:%M:%S')}"]
    gen = generate(files_dir, names)
    header += ["generation:"] + ["  " + line for line in gen]
    header.append(f"generation took {time.time() - start:.0f} s")
    print("\n".join(header), flush=True)
    names = [n for n in names if (files_dir / f"{n}.py").exists()]
    builds = None
    if not args.dry_run:
        t0 = time.time()
        builds = start_builds(files_dir, names, out_dir)
        BUILDS_DONE[0] = float("inf")
        if not args.overlap_builds:
            blines = finish_builds(builds, args.build_limit)
            builds = None
            BUILDS_DONE[0] = time.time()
            (out_dir / "builds.txt").write_text("\n".join(blines) + "\n")
            header += ["builds:"] + ["  " + line for line in blines]
            header.append(f"builds took {time.time() - t0:.0f} s (t={time.time() - start:.0f} s)")
            print("\n".join(header[-len(blines) - 2:]), flush=True)
    # The workers start now (during the builds, with --overlap-builds: a case's first forward waits
    # in torch's build lock for its build, the compiled references' controls meanwhile compile).
    workers = []
    per = {"main": args.main_workers, "compile": args.compile_workers}
    for n in names:
        for g in groups:
            cs = cases_for(n, args.only, [g])
            for i, chunk in enumerate(split_cases(cs, per.get(g, 1))):
                workers.append(Worker(args, n, g, chunk, out_dir, i))
    header.append(f"{len(workers)} workers ({args.main_workers} main, {args.compile_workers} compile a file; "
                  f"overlapping the builds: {bool(args.overlap_builds and not args.dry_run)}) (t={time.time() - start:.0f} s)")
    print(header[-1], flush=True)
    records = []
    results = open(out_dir / "results.jsonl", "w", buffering=1)
    last_summary = 0.0
    while not all(w.done() for w in workers):
        if builds is not None and all(b[4].poll() is not None for b in builds):
            blines = finish_builds(builds, args.build_limit)
            builds = None
            BUILDS_DONE[0] = time.time()
            (out_dir / "builds.txt").write_text("\n".join(blines) + "\n")
            header += ["builds (beside the workers' start):"] + ["  " + line for line in blines]
            header.append(f"builds done at t={time.time() - start:.0f} s")
            print("\n".join(header[-len(blines) - 2:]), flush=True)
        for w in workers:
            for rec in w.poll():
                records.append(rec)
                results.write(json.dumps(rec, default=str) + "\n")
                if rec["verdict"] not in ("ok", "SKIP"):
                    print(f"  {rec['file']} / {rec['case']}: {rec['verdict']} {rec.get('note', '')}", flush=True)
        if time.time() - last_summary > 15:
            pending = sum(len(w.todo) for w in workers)
            write_summary(out_dir, header, records, pending)
            last_summary = time.time()
        if builds is not None and time.time() - t0 > args.build_limit:
            blines = finish_builds(builds, 1)   # (kills what still runs)
            builds = None
            BUILDS_DONE[0] = time.time()
            header += ["builds (cut at --build-limit):"] + ["  " + line for line in blines]
        if time.time() - start > args.deadline:
            print(f"deadline of {args.deadline:.0f} s reached: stopping the workers", flush=True)
            for w in workers:
                w._kill()
                for rec in w.poll():
                    records.append(rec)
                    results.write(json.dumps(rec, default=str) + "\n")
            break
        time.sleep(0.5)
    if builds is not None:   # (every worker done or stopped before the builds ended)
        header += ["builds (stopped at the end):"] + ["  " + line for line in finish_builds(builds, 1)]
    pending = sum(len(w.todo) for w in workers)
    header.append(f"total {time.time() - start:.0f} s")
    write_summary(out_dir, header, records, pending)
    print((out_dir / "summary.txt").read_text())


if __name__ == "__main__":
    main()
