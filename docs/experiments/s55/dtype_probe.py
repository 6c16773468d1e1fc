"""Session 55's probe of dtypes inside reference modules: modules built in bf16 / fp16 (dtype= on
the Linear, .half() / .to(torch.bfloat16) in __init__, a `dtype` constructor argument), inputs in
the module's dtype or fp32, parameters and buffers of mixed dtypes, casts around ops (the
"upcast for softmax / norm, cast back" pattern), torch.autocast in forward, default-dtype reads,
finfo masks and constants made with the input's dtype. Each case is traced; a taken one is run by
the oracle (graph.interpret) against the module itself *in its own dtype* (fp32: 1e-5; 16-bit:
two steps of the dtype, but for test_ir.HALF_TIE_SHARE of the elements), in training and eval;
with --gen, `kgen generate` writes the file, which is constructed beside the reference under one
seed (state_dict equal, dtypes included) and read by KernelBench's static checker.

    PYTHONPATH=.:tests python docs/experiments/s55/dtype_probe.py [--gen] [--only SUBSTR] [--show NAME]

One line per case: TAKEN / REFUSED (the message's first line) / WRONG / CRASH / GENFAIL / ..."""

import argparse
import copy
import importlib.util
import sys
import tempfile
import traceback
from pathlib import Path

import torch
from click.testing import CliRunner

from kgen.check.static_checks import check_emitted
from kgen.cli import main
from kgen.frontend.reference import Reference
from kgen.frontend.trace import trace
from kgen.ir.graph import Unsupported

KB = Path("/work/main/.kb/src/kernelbench/kernel_static_checker.py")

TEMPLATE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features{ctor}):
        super().__init__()
{init}

    def forward(self, x):
{body}


batch_size = 8
in_features = 16
out_features = 24


def get_inputs():
    return [torch.rand(batch_size, in_features{in_dtype})]


def get_init_inputs():
    return [in_features, out_features{init_extra}]
'''

BF, HF = "torch.bfloat16", "torch.float16"


def src(init, body, in_dtype=None, ctor="", init_extra=""):
    ind = lambda lines: "\n".join("        " + l for l in lines)
    return TEMPLATE.format(init=ind(init), body=ind(body), in_dtype=f", dtype={in_dtype}" if in_dtype else "",
                           ctor=ctor, init_extra=init_extra)


LIN = "self.fc = nn.Linear(in_features, out_features{})"


def lin(dt=None):
    return LIN.format(f", dtype={dt}" if dt else "")


# name -> (init lines, forward lines, input dtype, ctor, init_extra)
CASES: dict = {}


def case(name, init, body, in_dtype=None, ctor="", init_extra=""):
    CASES[name] = (init, body, in_dtype, ctor, init_extra)


for dt, tag in ((BF, "bf16"), (HF, "fp16")):
    # ---- how the module is put in 16 bits
    case(f"{tag}: Linear(dtype=)", [lin(dt)], ["return torch.relu(self.fc(x))"], dt)
    case(f"{tag}: .to(dtype) in __init__", [lin(), f"self.to({dt})"], ["return torch.relu(self.fc(x))"], dt)
    case(f"{tag}: fc.to(dtype)", [lin() + f".to({dt})"], ["return torch.relu(self.fc(x))"], dt)
    case(f"{tag}: dtype ctor arg", ["self.fc = nn.Linear(in_features, out_features, dtype=dtype)"],
         ["return torch.relu(self.fc(x))"], dt, ctor=", dtype=torch.float32", init_extra=f", {dt}")
    case(f"{tag}: fp32 input to 16-bit module", [lin(dt)], ["return torch.relu(self.fc(x))"], None)
    case(f"{tag}: fp32 input cast in forward", [lin(dt)], [f"x = x.to({dt})", "return torch.relu(self.fc(x))"], None)
    case(f"{tag}: fp32 input cast to weight dtype", [lin(dt)],
         ["x = x.to(self.fc.weight.dtype)", "return torch.relu(self.fc(x))"], None)
    # ---- mixed parameters
    case(f"{tag}: fp32 LayerNorm in 16-bit module", [lin(dt), "self.ln = nn.LayerNorm(out_features)"],
         ["return self.ln(self.fc(x))"], dt)
    case(f"{tag}: fp32 bias param", [lin(dt), "self.b = nn.Parameter(torch.randn(out_features))"],
         ["return self.fc(x) + self.b"], dt)
    case(f"{tag}: fp32 0-d scale param", [lin(dt), "self.s = nn.Parameter(torch.tensor(0.3))"],
         ["return self.fc(x) * self.s"], dt)
    case(f"{tag}: fp64 buffer", [lin(dt), "self.register_buffer('s', torch.tensor(0.3, dtype=torch.float64))"],
         ["return self.fc(x) * self.s"], dt)
    case(f"{tag}: int buffer as count", [lin(dt), "self.register_buffer('n', torch.tensor(4))"],
         ["return self.fc(x) / self.n"], dt)
    case(f"{tag}: 16-bit bias buffer", [lin(dt), f"self.register_buffer('b', torch.randn(out_features, dtype={dt}))"],
         ["return self.fc(x) + self.b"], dt)
    case(f"{tag}: fp32 BatchNorm", [lin(dt), "self.bn = nn.BatchNorm1d(out_features)"],
         ["return self.bn(self.fc(x))"], dt)
    # ---- upcast / downcast
    case(f"{tag}: softmax(x.float()).to(x.dtype)", [lin(dt)],
         ["y = self.fc(x)", "return torch.softmax(y.float(), dim=-1).to(y.dtype)"], dt)
    case(f"{tag}: softmax(dtype=float32).type_as", [lin(dt)],
         ["y = self.fc(x)", "return F.softmax(y, dim=-1, dtype=torch.float32).type_as(y)"], dt)
    case(f"{tag}: layernorm upcast", [lin(dt), "self.ln = nn.LayerNorm(out_features)"],
         ["y = self.fc(x)", "return self.ln(y.float()).to(x.dtype)"], dt)
    case(f"{tag}: rmsnorm upcast", [lin(dt), f"self.w = nn.Parameter(torch.ones(out_features, dtype={dt}))"],
         ["y = self.fc(x).float()", "y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + 1e-6)",
          "return self.w * y.to(x.dtype)"], dt)
    case(f"{tag}: .to(self.fc.weight.dtype) at end", [lin(dt)],
         ["y = torch.tanh(self.fc(x))", "return y.to(self.fc.weight.dtype)"], dt)
    case(f"{tag}: output .float()", [lin(dt)], ["return torch.relu(self.fc(x)).float()"], dt)
    case(f"{tag}: .type_as(x)", [lin(dt)], ["return torch.relu(self.fc(x)).type_as(x)"], dt)
    case(f"{tag}: .to(x.dtype)", [lin(dt)], ["return torch.relu(self.fc(x)).to(x.dtype)"], dt)
    # ---- constants with the input's dtype
    case(f"{tag}: finfo(x.dtype).min mask", [lin(dt)],
         ["y = self.fc(x)", "return y.masked_fill(y < 0, torch.finfo(y.dtype).min)"], dt)
    case(f"{tag}: where finfo.min", [lin(dt)],
         ["y = self.fc(x)", "return torch.where(y > 0, y, torch.finfo(x.dtype).min)"], dt)
    case(f"{tag}: torch.tensor(c, dtype=x.dtype)", [lin(dt)],
         ["y = self.fc(x)", "return y * torch.tensor(0.1, dtype=x.dtype)"], dt)
    case(f"{tag}: torch.tensor(c, device, dtype)", [lin(dt)],
         ["y = self.fc(x)", "return y + torch.tensor(0.1, device=x.device, dtype=x.dtype)"], dt)
    case(f"{tag}: x.new_tensor", [lin(dt)], ["y = self.fc(x)", "return y * y.new_tensor(0.1)"], dt)
    case(f"{tag}: torch.full_like", [lin(dt)], ["y = self.fc(x)", "return y + torch.full_like(y, 0.1)"], dt)
    case(f"{tag}: ones_like * c", [lin(dt)], ["y = self.fc(x)", "return torch.maximum(y, torch.zeros_like(y))"], dt)
    case(f"{tag}: tensor(c) no dtype", [lin(dt)], ["y = self.fc(x)", "return y * torch.tensor(0.1)"], dt)
    case(f"{tag}: tensor(c, dtype=float32)", [lin(dt)],
         ["y = self.fc(x)", "return y * torch.tensor(0.1, dtype=torch.float32)"], dt)
    case(f"{tag}: tensor([c]) 1-elem", [lin(dt)], ["y = self.fc(x)", "return y * torch.tensor([0.1], device=x.device)"], dt)
    case(f"{tag}: get_default_dtype cast", [lin(dt)],
         ["y = self.fc(x)", "return y.to(torch.get_default_dtype())"], dt)
    case(f"{tag}: autocast in forward", [lin()],
         [f"with torch.autocast('cuda', dtype={dt}):", "    y = self.fc(x)", "return torch.relu(y)"], None)
    case(f"{tag}: autocast disabled in forward", [lin(dt)],
         ["with torch.autocast('cuda', enabled=False):", "    y = self.fc(x)", "return torch.relu(y)"], dt)
    case(f"{tag}: eps finfo", [lin(dt)],
         ["y = self.fc(x)", "return y / (y.abs().sum(-1, keepdim=True) + torch.finfo(y.dtype).eps)"], dt)
    case(f"{tag}: sum(dtype=float32)", [lin(dt)],
         ["y = self.fc(x)", "return y - y.sum(-1, keepdim=True, dtype=torch.float32).to(y.dtype)"], dt)
    case(f"{tag}: mean upcast then cast", [lin(dt)],
         ["y = self.fc(x)", "m = y.float().mean(-1, keepdim=True)", "return (y - m.to(y.dtype))"], dt)
    case(f"{tag}: x.half/.bfloat16() same dtype", [lin(dt)],
         ["y = self.fc(x)", "return torch.relu(y)." + ("bfloat16()" if tag == "bf16" else "half()")], dt)

# fp32 modules
case("fp32: .float() no-op", [lin()], ["return torch.relu(self.fc(x)).float()"])
case("fp32: softmax(x.float()).to(x.dtype)", [lin()], ["y = self.fc(x)", "return torch.softmax(y.float(), -1).to(y.dtype)"])
case("fp32: .to(self.fc.weight.dtype)", [lin()], ["return torch.tanh(self.fc(x)).to(self.fc.weight.dtype)"])
case("fp32: finfo(x.dtype).min", [lin()], ["y = self.fc(x)", "return y.masked_fill(y < 0, torch.finfo(y.dtype).min)"])
case("fp32: tensor(c, dtype=x.dtype)", [lin()], ["y = self.fc(x)", "return y * torch.tensor(0.1, dtype=x.dtype)"])
case("fp32: new_tensor", [lin()], ["y = self.fc(x)", "return y * y.new_tensor(0.1)"])
case("fp32: get_default_dtype", [lin()], ["return torch.tanh(self.fc(x)).to(torch.get_default_dtype())"])
case("fp32: default dtype in init", [lin(), "self.s = nn.Parameter(torch.ones(out_features, dtype=torch.get_default_dtype()))"],
     ["return self.fc(x) * self.s"])
case("fp32: fp64 buffer", [lin(), "self.register_buffer('s', torch.tensor(0.3, dtype=torch.float64))"],
     ["return self.fc(x) * self.s"])
case("fp32: fp64 vector buffer", [lin(), "self.register_buffer('s', torch.rand(out_features, dtype=torch.float64))"],
     ["return self.fc(x) * self.s"])
case("fp32: int buffer as count", [lin(), "self.register_buffer('n', torch.tensor(4))"], ["return self.fc(x) / self.n"])
case("fp32: int vector buffer", [lin(), "self.register_buffer('n', torch.arange(out_features))"], ["return self.fc(x) * self.n"])
case("fp32: bf16 bias param", [lin(), f"self.b = nn.Parameter(torch.randn(out_features, dtype={BF}))"],
     ["return self.fc(x) + self.b"])
case("fp32: .double() then back", [lin()], ["return torch.tanh(self.fc(x).double()).float()"])
case("fp32: x.to(fc.weight) (tensor arg)", [lin()], ["x = x.to(self.fc.weight)", "return torch.relu(self.fc(x))"])
case("fp32: .to(x) (tensor arg)", [lin()], ["return torch.relu(self.fc(x)).to(x)"])
case("fp32: half module cast at input", [lin(), "self.half()"], ["x = x.half()", "return torch.relu(self.fc(x)).float()"])
case("fp32: autocast in forward", [lin()], [f"with torch.autocast('cuda', dtype={BF}):", "    y = self.fc(x)", "return y.float()"])
case("fp32: autocast cpu in forward", [lin()], [f"with torch.autocast('cpu', dtype={BF}):", "    y = self.fc(x)", "return y.float()"])
case("fp32: x.float() on input", [lin()], ["return torch.relu(self.fc(x.float()))"])
case("fp32: fp16 input to fp32 module, .float()", [lin()], ["return torch.relu(self.fc(x.float()))"], HF)
case("fp32: is_floating_point branch", [lin()],
     ["y = self.fc(x)", "if y.dtype == torch.float16:", "    y = y.float()", "return torch.relu(y)"])
case("bf16: dtype branch", [lin(BF)],
     ["y = self.fc(x)", "if y.dtype != torch.float32:", "    y = y * 2.0", "return torch.relu(y)"], BF)


def oracle(path: Path, ref: Reference, graph, training: bool):
    """graph.interpret against the module, in the module's and input's own dtypes."""
    ctx: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), ctx)
    torch.manual_seed(0)
    model = ctx["Model"](*ctx["get_init_inputs"]())
    twin = copy.deepcopy(model)
    model.train(training)
    twin.train(training)
    inp = ctx["get_inputs"]()[0]
    x = (torch.rand(inp.shape) * 2 - 1).to(inp.dtype)
    with torch.no_grad():
        expect = model(x)
        got = graph.interpret(x, twin)
    assert got.dtype == expect.dtype, f"dtype {got.dtype} vs module's {expect.dtype}"
    assert got.shape == expect.shape
    if expect.dtype in (torch.bfloat16, torch.float16):
        step = torch.finfo(expect.dtype).eps
        big = float(expect.abs().max().float()) if torch.isfinite(expect).all() else 1.0
        beyond = ~torch.isclose(got, expect, rtol=2 * step, atol=2 * step * big, equal_nan=True)
        assert float(beyond.float().mean()) <= 1e-3, f"{int(beyond.sum())}/{beyond.numel()} beyond 2 steps " \
            f"(max {float((got.float() - expect.float()).abs().max()):.3g})"
    else:
        torch.testing.assert_close(got, expect, rtol=1e-5, atol=1e-6, equal_nan=True)
    for (name, a), (_, b) in zip(model.named_buffers(), twin.named_buffers()):
        assert a.dtype == b.dtype
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-3, msg=name)


def kb_checker():
    spec = importlib.util.spec_from_file_location("kb_static", KB)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m.validate_kernel_static


def run_case(name, tmp: Path, gen: bool, kb):
    path = tmp / "ref_case.py"
    path.write_text(src(*CASES[name]))
    try:
        ref = Reference(path)
        graph = trace(ref)
    except Unsupported as e:
        return "REFUSED", str(e).splitlines()[0].replace(str(path), "REF")
    except Exception as e:  # noqa: BLE001
        tb = traceback.format_exc().strip().splitlines()
        return "CRASH", f"{type(e).__name__}: {str(e)[:200]} @ {[l for l in tb if 'File' in l][-1].strip()[:160]}"
    try:
        oracle(path, ref, graph, True)
        oracle(path, ref, graph, False)
    except AssertionError as e:
        return "WRONG", str(e).replace("\n", " ")[:300]
    except Exception as e:  # noqa: BLE001
        tb = traceback.format_exc().strip().splitlines()
        return "CRASH", f"(oracle) {type(e).__name__}: {str(e)[:200]} @ {[l for l in tb if 'File' in l][-1].strip()[:160]}"
    note = f"fp32_casts={len(graph.fp32_casts)}" if graph.fp32_casts else ""
    if not gen:
        return "TAKEN", note
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
        exec(compile(path.read_text(), str(path), "exec"), ctx)
        torch.manual_seed(42)
        expect = ctx["Model"](*ctx["get_init_inputs"]()).state_dict()
        ns: dict = {}
        exec(compile(text, str(out), "exec"), ns)
        torch.manual_seed(42)
        got = ns["ModelNew"](*ns["get_init_inputs"]()).state_dict()
        assert list(got) == list(expect), f"{list(got)} vs {list(expect)}"
        for k in expect:
            assert got[k].dtype == expect[k].dtype, f"{k}: {got[k].dtype} vs {expect[k].dtype}"
            assert torch.equal(got[k], expect[k]), k
        gi, ei = ns["get_inputs"](), ctx["get_inputs"]()
        assert [t.dtype for t in gi] == [t.dtype for t in ei], "get_inputs dtypes"
    except AssertionError as e:
        return "WRONGBUILD", str(e)[:300]
    except Exception as e:  # noqa: BLE001
        return "BUILDCRASH", f"{type(e).__name__}: {str(e)[:200]}"
    return "TAKEN", ("generated " + note).strip()


def main_():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gen", action="store_true")
    ap.add_argument("--only", default="")
    ap.add_argument("--show", default="")
    args = ap.parse_args()
    if args.show:
        print(src(*CASES[args.show]))
        return
    kb = kb_checker() if args.gen else None
    tally: dict = {}
    with tempfile.TemporaryDirectory() as t:
        for i, name in enumerate(CASES):
            if args.only not in name:
                continue
            tmp = Path(t) / str(i)
            tmp.mkdir()
            status, msg = run_case(name, tmp, args.gen, kb)
            tally[status] = tally.get(status, 0) + 1
            print(f"{status:10s} {name:45s} {msg}", flush=True)
    print(tally)


if __name__ == "__main__":
    main_()
