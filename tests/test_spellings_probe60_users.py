"""Session 60's probe (call A) of modules as ML engineers write them, not KernelBench's text (CPU),
generated over axes: the input (batch, K), (batch, tokens, K) or flattened (batch, 4, 4); how the
GEMM is held (bias-free Linear and a bias parameter, F.linear, x @ W.t(), a (K, N) weight,
Sequential in a Sequential, ModuleDict, ModuleList, a child class); ~120 ops after it with
non-default arguments (LeakyReLU / ELU / Softplus / GELU / CELU / PReLU(N) / Threshold, LayerNorm
without affine or bias, RMSNorm, GroupNorm(affine=False), BatchNorm1d(momentum=None /
track_running_stats=False), F.normalize, var / std with correction, keepdim, tuple / list / negative
dims, clamp of min or max alone or of tensors, masks, no_grad statistics); whole modules (MLPs,
residual and post-norm blocks, shared and tied weights, a dataclass config, kwargs with defaults,
branches on flags and self.training, regressor and policy heads); each also as a float32 module
converted to bf16 / fp16 and as one built in bf16. The driver ran 787 modules; this file runs a
covering sample. Taken: the IR against the module in fp64 (training and eval, buffers, gradients
against torch.autograd) and in bf16 / fp16 against fp64 (at most twice eager's error and a step).

Tally of the 787, after this probe's fixes: taken and right 667 (2 of them refused before the
first fix below; 12 differ from the module run in fp64 alone, as the module itself does there:
nn.RMSNorm's default eps is its dtype's, float64's in fp64 but float32's in fp32 / bf16 / fp16,
which kgen bakes in, and a `.float()` in an fp64 module; none differs in the module's dtype);
refused rightly 85 (ops over the batch or the tokens, a norm before the GEMM, two GEMMs of the
input, argmax / sort / topk / cumsum / prod, finfo of the dtype, the batch as a number, dropout
active in eval, tuple and dict outputs, a loss, torch's own errors); refused wrongly 35, left (the
message made clear for 5 of them, below): GLU / chunk / split of the GEMM's output into halves,
F.avg_pool1d of a 2-d value, a forward that reads a 3-d input's sizes, flatten(0, 1) of the
tokens, transpose / permute round trips (BatchNorm1d of h.transpose(1, 2) is the rows'
BatchNorm), einsum('bsi,oi->bso'), InstanceNorm1d of x.unsqueeze(1), cosine_similarity /
pairwise_distance with a parameter, F.rrelu(training=False), AlphaDropout, .data,
torch.ones(1, device=...), x * True; wrong 0.

Fixed in this probe:
- a (1, 1, N) parameter (LayerScale's gamma, a bias kept so) on a (batch, tokens, K) input was
  refused as "this module fails one of the two ways (RuntimeError: shape '[2, 3, 6, 16]' is
  invalid ...)": kgen's own reshape of the rows' (1, R, N) output back, taking the rows as
  dimension 0. Now trace.rows_output and the emitted forward take them at trace.rows_at.
- unclear messages: `B, S, D = x.shape` / `h.shape[2]` on a 3-d input said "not enough values to
  unpack (expected 3, got 2)" / "the size index 2 of a 2-d shape" and nothing of kgen tracing the
  rows (now said, Tracer.rows_note); a row op of a (1, M, N) value a wider parameter gave said "a
  value that reads the module's input" (it reads none); flatten(0, 1) said ".flatten() is not
  supported" (flatten(1) is).
"""

import copy
import textwrap
import warnings

import pytest
import torch

from kgen.frontend.reference import Reference
from kgen.frontend.trace import rows_at, rows_output, trace
from kgen.ir.autodiff import graph_vjp
from kgen.ir.graph import Unsupported

HEADER = "import math\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
R3 = (4, 5, 16)


def source(init: str, body: str, shape=(8, 16), sig="in_features, out_features", args="16, 16", prelude="",
           dtype=None) -> str:
    """A reference file: Model.__init__'s lines `init`, forward's lines `body` (x in, x out)."""
    dt = f", dtype=torch.{dtype}" if dtype else ""
    indent = lambda text: textwrap.indent(textwrap.dedent(text).strip("\n"), " " * 8)   # noqa: E731
    return (f"{HEADER}{prelude}\n\nclass Model(nn.Module):\n    def __init__(self, {sig}):\n        super().__init__()\n"
            f"{indent(init)}\n\n    def forward(self, x):\n{indent(body)}\n        return x\n\n\n"
            f"def get_inputs():\n    return [torch.randn({', '.join(map(str, shape))}{dt})]\n\n\n"
            f"def get_init_inputs():\n    return [{args}]\n")


def reference(tmp_path, text: str, name: str = "ref") -> Reference:
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    return Reference(path)


def _input(ref: Reference, dtype: torch.dtype) -> torch.Tensor:
    torch.manual_seed(1)
    return torch.randn(*(ref.rows_of or tuple(ref.input.shape)), dtype=torch.float64).to(dtype)


def _ir(graph, ref: Reference, x: torch.Tensor, model) -> torch.Tensor:
    """The IR run on x as kgen runs it: on its rows where the input is (..., K), reshaped back."""
    if ref.rows_of is None:
        return graph.interpret(x, model)
    dims = ref.feature_dims
    lead = tuple(x.shape[:x.dim() - dims])
    return rows_output(graph.interpret(x.reshape(-1, x.shape[-dims:].numel()), model), lead, rows_at(graph))


def check_taken(ref: Reference, graph, grads: bool = True) -> None:
    """The IR against the module: in fp64 (output and buffers, training and eval), its gradients
    against torch.autograd's, and in bf16 / fp16 (the module converted, as model.to(dtype)) against
    fp64, to twice eager's error and a step."""
    for training in ((False,) if graph.dropouts else (True, False)):
        torch.manual_seed(0)
        model = ref.Model(*ref.init_args()).double().train(training)
        twin = copy.deepcopy(model)
        x = _input(ref, torch.float64)
        with torch.no_grad():
            expect, got = model(x), _ir(graph, ref, x, twin)
        assert got.shape == expect.shape
        torch.testing.assert_close(got, expect.to(got.dtype), rtol=1e-9, atol=1e-11, equal_nan=True)
        for (name, a), (_, b) in zip(model.named_buffers(), twin.named_buffers()):
            torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-11, msg=name)
        if grads:
            x.requires_grad_()
            y = ref.Model(*ref.init_args()).double().train(training)
            y.load_state_dict(model.state_dict())
            torch.manual_seed(0)
            model = ref.Model(*ref.init_args()).double().train(training)
            twin = copy.deepcopy(model)
            out = model(x)
            g = torch.randn_like(out)
            names = [n for n, _ in model.named_parameters()]
            expect = torch.autograd.grad(out, [x, *model.parameters()], g, allow_unused=True)
            lead = x.dim() - ref.feature_dims   # (the leading sizes that are the rows)
            rows = x.detach() if ref.rows_of is None else x.detach().reshape(-1, x.shape[lead:].numel())
            grad = g.reshape(-1, *g.shape[lead + rows_at(graph):]) if ref.rows_of and g.dim() else g
            with torch.no_grad():
                gx, gp = graph_vjp(graph, rows, twin, grad)
            torch.testing.assert_close(gx.reshape(x.shape), expect[0], rtol=1e-7, atol=1e-9)
            for name, e in zip(names, expect[1:]):
                if e is not None:
                    torch.testing.assert_close(gp[name].reshape(e.shape), e, rtol=1e-7, atol=1e-9, msg=name)
    for dt in (torch.bfloat16, torch.float16):
        torch.manual_seed(0)
        model = ref.Model(*ref.init_args()).to(dt).train(not graph.dropouts)   # (a mask is drawn in training)
        twin, exact = copy.deepcopy(model), copy.deepcopy(model).double()
        x = _input(ref, dt)
        with torch.no_grad():
            eager, got, want = model(x), _ir(graph, ref, x, twin), exact(x.double())
        assert got.dtype == eager.dtype
        error = lambda t: (t.double() - want).abs().nan_to_num(1e30).max().item()   # noqa: E731
        step = torch.finfo(dt).eps * max(want.abs().max().item(), 1e-3)
        assert error(got) <= 2 * error(eager) + 2 * step, (dt, error(got), error(eager))


# ---- the covering sample ------------------------------------------------------------------------
L = "self.fc = nn.Linear(in_features, out_features)"
# How the GEMM is held and called (each with a LayerNorm after it, on a (batch, tokens, K) input).
HEADS = {
    "bias-free Linear and a bias parameter": ("self.fc = nn.Linear(in_features, out_features, bias=False)\n"
                                              "self.bias = nn.Parameter(0.1 * torch.randn(out_features))", "x = self.fc(x) + self.bias"),
    "F.linear of parameters": ("self.weight = nn.Parameter(torch.randn(out_features, in_features) / 4)\n"
                               "self.bias = nn.Parameter(torch.zeros(out_features))", "x = F.linear(x, self.weight, self.bias)"),
    "x @ W.t() + b": ("self.weight = nn.Parameter(torch.randn(out_features, in_features) / 4)\n"
                      "self.bias = nn.Parameter(0.1 * torch.randn(out_features))", "x = x @ self.weight.t() + self.bias"),
    "torch.matmul of a (K, N) weight": ("self.weight = nn.Parameter(torch.randn(in_features, out_features) / 4)",
                                        "x = torch.matmul(x, self.weight)"),
    "Sequential in a Sequential": ("self.net = nn.Sequential(nn.Sequential(nn.Linear(in_features, out_features)), nn.Identity())",
                                   "x = self.net(x)"),
    "ModuleDict": ("self.layers = nn.ModuleDict({'proj': nn.Linear(in_features, out_features)})", "x = self.layers['proj'](x)"),
    "ModuleList loop": ("self.layers = nn.ModuleList([nn.Linear(in_features, out_features)])", "for layer in self.layers:\n    x = layer(x)"),
    "a child class": ("self.proj = Proj(in_features, out_features)", "x = self.proj(x)"),
}
PROJ = ("\n\nclass Proj(nn.Module):\n    def __init__(self, d_in, d_out):\n        super().__init__()\n"
        "        self.lin = nn.Linear(d_in, d_out)\n\n    def forward(self, x):\n        return self.lin(x)\n")
# An op after the Linear, as users write it with non-default arguments: (init, body, shapes).
BOTH = ((8, 16), R3)
TAILS = {
    "LeakyReLU(0.2)": ("self.act = nn.LeakyReLU(0.2)", "x = self.act(x)", BOTH),
    "ELU(alpha=0.5)": ("self.act = nn.ELU(alpha=0.5)", "x = self.act(x)", ((8, 16),)),
    "Softplus(beta, threshold)": ("self.act = nn.Softplus(beta=2.0, threshold=5.0)", "x = self.act(x)", ((8, 16),)),
    "GELU('none'), GELU('tanh')": ("", "x = F.gelu(x, approximate='none') + F.gelu(x, approximate='tanh')", ((8, 16),)),
    "CELU, Hardshrink, Threshold": ("self.t = nn.Threshold(0.1, 20.0)", "x = self.t(F.hardshrink(F.celu(x, 2.0), 0.3))", ((8, 16),)),
    "PReLU(N)": ("self.act = nn.PReLU(out_features, init=0.1)", "x = self.act(x)", ((8, 16),)),
    "LayerNorm(elementwise_affine=False)": ("self.norm = nn.LayerNorm(out_features, elementwise_affine=False)", "x = self.norm(x)", (R3,)),
    "LayerNorm(bias=False, eps)": ("self.norm = nn.LayerNorm(out_features, eps=1e-3, bias=False)", "x = self.norm(x)", (R3,)),
    "F.layer_norm(x, x.shape[-1:])": ("", "x = F.layer_norm(x, x.shape[-1:])", (R3,)),
    "nn.RMSNorm(eps)": ("self.norm = nn.RMSNorm(out_features, eps=1e-6)", "x = self.norm(x)", (R3,)),
    "GroupNorm(affine=False)": ("self.norm = nn.GroupNorm(4, out_features, affine=False, eps=1e-3)", "x = self.norm(x)", ((8, 16),)),
    "BatchNorm1d(momentum=None)": ("self.bn = nn.BatchNorm1d(out_features, momentum=None)", "x = self.bn(x)", ((8, 16),)),
    "BatchNorm1d(track_running_stats=False)": ("self.bn = nn.BatchNorm1d(out_features, track_running_stats=False)", "x = self.bn(x)", ((8, 16),)),
    "F.normalize(p=1)": ("", "x = F.normalize(x, p=1.0, dim=-1, eps=1e-6)", (R3,)),
    "x / x.norm().clamp_min": ("", "x = x / x.norm(dim=-1, keepdim=True).clamp_min(1e-12)", (R3,)),
    "var(correction=0)": ("", "x = (x - x.mean(dim=-1, keepdim=True)) / torch.sqrt(x.var(dim=-1, keepdim=True, correction=0) + 1e-5)", (R3,)),
    "std_mean": ("", "s, m = torch.std_mean(x, dim=-1, keepdim=True)\nx = (x - m) / (s + 1e-6)", (R3,)),
    "softmax with a temperature": ("self.temperature = 0.7", "x = torch.softmax(x / self.temperature, dim=-1)", BOTH),
    "softmin": ("", "x = F.softmin(x, dim=-1)", ((8, 16),)),
    "x - logsumexp": ("", "x = x - x.logsumexp(-1, keepdim=True)", (R3,)),
    "mean(dim=[-1], keepdim)": ("", "x = x - x.mean(dim=[-1], keepdim=True)", (R3,)),
    "amax(dim=(-1,))": ("", "x = x.amax(dim=(-1,))", (R3,)),
    "torch.max(-1, keepdim)[0]": ("", "x, _ = torch.max(x, -1, keepdim=True)", (R3,)),
    "norm(p=1)": ("", "x = torch.norm(x, p=1, dim=-1, keepdim=True)", ((8, 16),)),
    "vector_norm(inf)": ("", "x = torch.linalg.vector_norm(x, ord=float('inf'), dim=-1, keepdim=True)", ((8, 16),)),
    "std(-1) without keepdim": ("", "x = x.std(-1)", ((8, 16),)),
    "mean() of all": ("", "x = x.mean()", BOTH),
    "clamp(min) only": ("", "x = torch.clamp(x, min=0.1)", ((8, 16),)),
    "clamp(max) only of a tensor": ("self.cap = nn.Parameter(torch.ones(out_features))", "x = torch.clamp(x, max=self.cap)", ((8, 16),)),
    "clamp(min=, max=) of tensors": ("self.lo = nn.Parameter(torch.full((out_features,), -0.5))\n"
                                     "self.hi = nn.Parameter(torch.full((out_features,), 0.5))", "x = torch.clamp(x, min=self.lo, max=self.hi)", (R3,)),
    "masked_fill of a bool buffer, softmax": ("self.register_buffer('mask', torch.arange(out_features) % 3 == 0)",
                                              "x = x.masked_fill(self.mask, float('-inf')).softmax(-1)", (R3,)),
    "with torch.no_grad() statistic": ("", "with torch.no_grad():\n    m = x.mean(-1, keepdim=True)\nx = x - m", (R3,)),
    "a module-level helper": ("", "x = swish(x)", ((8, 16),)),
    "a lambda attribute": ("self.act = lambda t: t * torch.sigmoid(1.5 * t)", "x = self.act(x)", ((8, 16),)),
    "functools.partial attribute": ("self.act = functools.partial(F.leaky_relu, negative_slope=0.2)", "x = self.act(x)", ((8, 16),)),
    "if self.training: dropout": ("self.drop = nn.Dropout(0.2)", "if self.training:\n    x = self.drop(x)", ((8, 16),)),
    "F.dropout(p, self.training)": ("self.p = 0.1", "x = F.dropout(F.gelu(x), self.p, self.training)", ((8, 16),)),
    "entropy of log_softmax": ("", "lp = x.log_softmax(-1)\nx = -(lp.exp() * lp).sum(-1)", (R3,)),
    "per-row absmax quantize": ("", "s = x.abs().amax(-1, keepdim=True) / 127\nx = torch.round(x / s).clamp(-128, 127) * s", (R3,)),
}
HELPERS = "\nimport functools\n\n\ndef swish(t):\n    return t * torch.sigmoid(t)\n"
# Whole modules as users write them: (init, body, shape, signature, init args, prelude).
MODULES = {
    "MLP in a Sequential with Dropout": ("self.net = nn.Sequential(nn.Linear(in_features, 32), nn.GELU(), nn.Dropout(0.1), "
                                         "nn.Linear(32, out_features))", "x = self.net(x)", R3),
    "residual MLP": ("self.fc1 = nn.Linear(in_features, 4 * in_features)\nself.fc2 = nn.Linear(4 * in_features, in_features)",
                     "x = x + self.fc2(F.gelu(self.fc1(x)))", R3),
    "post-norm residual MLP": ("self.fc1 = nn.Linear(in_features, 32)\nself.fc2 = nn.Linear(32, in_features)\n"
                               "self.norm = nn.LayerNorm(in_features)", "x = self.norm(x + self.fc2(torch.relu(self.fc1(x))))", R3),
    "fc(x) + x": (L, "x = self.fc(x) + x", R3),
    "shared weights twice": (L, "h = self.fc(x)\nx = self.fc(torch.relu(h))", R3),
    "tied F.linear of the same weight": (L, "h = torch.tanh(self.fc(x))\nx = F.linear(h, self.fc.weight)", (8, 16)),
    # (refused until session 62: one GEMM of the two weights since, tests/test_spellings_probe62_side.py)
    "SwiGLU, two GEMMs of the input side by side": ("self.gate = nn.Linear(in_features, 32)\nself.up = nn.Linear(in_features, 32)\n"
                                                    "self.down = nn.Linear(32, in_features)",
                                                    "x = self.down(F.silu(self.gate(x)) * self.up(x))", R3),
    "three Linears then LayerNorm": ("self.fc1 = nn.Linear(in_features, 32)\nself.fc2 = nn.Linear(32, 32)\n"
                                     "self.fc3 = nn.Linear(32, out_features)\nself.ln = nn.LayerNorm(out_features)",
                                     "x = self.ln(self.fc3(F.relu(self.fc2(F.relu(self.fc1(x))))))", R3),
    "BatchNorm1d in each of two parts": ("self.fc1 = nn.Linear(in_features, 32)\nself.bn1 = nn.BatchNorm1d(32)\n"
                                         "self.fc2 = nn.Linear(32, out_features)\nself.bn2 = nn.BatchNorm1d(out_features, momentum=None)",
                                         "x = F.relu(self.bn1(self.fc1(x)))\nx = self.bn2(self.fc2(x))", (8, 16)),
    "regressor head squeezed": ("self.fc1 = nn.Linear(in_features, 32)\nself.head = nn.Linear(32, 1)",
                                "x = self.head(torch.relu(self.fc1(x))).squeeze(-1)", (8, 16)),
    "policy with max_action keyword": ("self.fc = nn.Linear(in_features, out_features)\nself.max_action = max_action",
                                       "x = self.max_action * torch.tanh(self.fc(x))", (8, 16),
                                       "in_features, out_features, max_action=2.0", "16, 16, 0.5"),
    "CLIP logit scale of a normalized projection": (L + "\nself.logit_scale = nn.Parameter(torch.ones([]) * math.log(1 / 0.07))",
                                                    "x = self.logit_scale.exp() * F.normalize(self.fc(x), dim=-1)", R3),
    "a dataclass config": ("self.fc = nn.Linear(cfg.d_in, cfg.d_out)\nself.norm = nn.LayerNorm(cfg.d_out, eps=cfg.eps)\n"
                           "self.act = ACT[cfg.act]", "x = self.act(self.norm(self.fc(x)))", R3, "cfg", "Config()",
                           "\nfrom dataclasses import dataclass\n\n\n@dataclass\nclass Config:\n    d_in: int = 16\n"
                           "    d_out: int = 24\n    eps: float = 1e-6\n    act: str = 'gelu'\n\n\n"
                           "ACT = {'gelu': nn.GELU(), 'relu': nn.ReLU()}\n"),
    "an activation by name, branched": (L + "\nself.activation = activation",
                                        "x = self.fc(x)\nif self.activation == 'gelu':\n    x = F.gelu(x)\nelif self.activation == 'relu':\n    x = F.relu(x)",
                                        R3, "in_features, out_features, activation='gelu'", "16, 16, 'relu'"),
    "LayerNorm or Identity by a flag": (L + "\nself.norm = nn.LayerNorm(out_features) if use_norm else nn.Identity()",
                                        "x = self.norm(self.fc(x))", R3, "in_features, out_features, use_norm=False"),
    "a flattened (batch, 4, 4) input": ("self.fc = nn.Linear(16, out_features)", "x = torch.relu(self.fc(torch.flatten(x, 1)))", (8, 4, 4)),
    "adaLN-like affine": (L + "\nself.scale = nn.Parameter(0.1 * torch.randn(out_features))\nself.shift = nn.Parameter(0.1 * torch.randn(out_features))",
                          "x = F.layer_norm(self.fc(x), (16,), eps=1e-6) * (1 + self.scale) + self.shift", R3),
    "the input read after the chain": ("self.fc1 = nn.Linear(in_features, 32)\nself.fc2 = nn.Linear(32, in_features)",
                                       "x = self.fc2(torch.relu(self.fc1(x))) * torch.sigmoid(x)", R3),
    "a module built in bf16 with LayerNorm(bias=False)": (
        "self.fc = nn.Linear(in_features, out_features, bias=False, dtype=torch.bfloat16)\n"
        "self.ln = nn.LayerNorm(out_features, bias=False, dtype=torch.bfloat16)", "x = F.gelu(self.ln(self.fc(x)))", R3,
        "in_features, out_features", "16, 16", "", "bfloat16"),
    "a module built in fp16, var(correction=0)": ("self.fc = nn.Linear(in_features, out_features, dtype=torch.float16)",
                                                  "x = self.fc(x).var(-1, correction=0)", R3, "in_features, out_features", "16, 16", "", "float16"),
    # (refused until session 62: a prologue, tests/test_spellings_probe62_prologue.py)
    "LayerNorm before the Linear (pre-norm)": ("self.norm = nn.LayerNorm(in_features)\n" + L, "x = self.fc(self.norm(x))", R3),
}
# Refused, each judged right (the message says what and why): (init, body, shape, the message).
REFUSED = {
    "residual around the second Linear": ("self.fc1 = nn.Linear(in_features, 16)\nself.fc2 = nn.Linear(16, 16)",
                                          "h = F.gelu(self.fc1(x))\nx = self.fc2(h) + h", (8, 16), r"a value computed before the GEMM at line \d+ is used after it"),
    "mean over the tokens": (L, "x = self.fc(x).mean(dim=1)", R3, r"this module computes otherwise on them"),
    "softmax of a 3-d value with the implicit dim": (L, "x = F.softmax(self.fc(x))", R3, r"its values differ"),
    "a branch on self.training": (L, "x = self.fc(x)\nif self.training:\n    x = x * 0.9\nelse:\n    x = x * 1.1", (8, 16),
                                  r"computes other ops in training mode than in eval mode"),
    "F.dropout active in eval": (L, "x = F.dropout(self.fc(x), 0.2)", (8, 16), r"dropout with p=0\.2 is active in eval mode"),
    "torch.finfo(x.dtype).min": (L + "\nself.register_buffer('mask', torch.arange(out_features) % 2 == 0)",
                                 "h = self.fc(x)\nx = h.masked_fill(self.mask, torch.finfo(h.dtype).min).softmax(-1)", R3,
                                 r"a number that depends on the dtype the module runs in"),
    "the batch size as a number": (L, "x = self.fc(x) / x.shape[0]", (8, 16), r"the batch size used as a number"),
    "a tuple returned": (L, "x = self.fc(x), self.fc(x).mean(-1)", (8, 16), r"returns a tuple of 2 values"),
    "std of one feature": (L, "x = self.fc(x).std(-1, keepdim=True)", (8, 16), r"std of 1 elements with correction 1",
                           "in_features, out_features", "16, 1"),
    "F.normalize(p=3)": (L, "x = F.normalize(self.fc(x), p=3, dim=-1)", (8, 16), r"a norm with p=3"),
    "h - h.mean(-1) without keepdim": (L, "h = self.fc(x)\nx = h - h.mean(-1)", (16, 16), r"without keepdim .* use keepdim=True"),
}


def _sample():
    out = []
    for name, (init, call) in HEADS.items():
        out.append(("head", name, init + "\nself.norm = nn.LayerNorm(out_features)", call + "\nx = self.norm(x)", R3,
                    "in_features, out_features", "16, 16", PROJ if name == "a child class" else "", None, None))
    for name, (init, body, shapes) in TAILS.items():
        for shape in shapes:
            out.append(("tail", name, L + ("\n" + init if init else ""), "x = self.fc(x)\n" + body, shape,
                        "in_features, out_features", "16, 16", HELPERS, None, None))
    for name, (init, body, shape, *rest) in MODULES.items():
        sig, args, prelude, dtype = list(rest) + ["in_features, out_features", "16, 16", "", None][len(rest):]
        out.append(("module", name, init, body, shape, sig, args, prelude, dtype, None))
    for name, (init, body, shape, message, *rest) in REFUSED.items():
        sig, args = (list(rest) + ["in_features, out_features", "16, 16"][len(rest):])
        out.append(("refused", name, init, body, shape, sig, args, "", None, message))
    return out


SAMPLE = _sample()


@pytest.mark.parametrize("case", SAMPLE, ids=[f"{c[0]}-{c[1]}-{len(c[4])}d" for c in SAMPLE])
def test_a_users_module(case, tmp_path):
    kind, name, init, body, shape, sig, args, prelude, dtype, message = case
    ref = reference(tmp_path, source(init, body, shape, sig, args, prelude, dtype))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if message is not None:
            with pytest.raises(Unsupported, match=message):
                trace(ref)
            return
        graph = trace(ref)
    check_taken(ref, graph)


# ---- the fixes, each on its own ----------------------------------------------------------------
def test_reading_a_3d_inputs_sizes_is_refused_saying_kgen_traced_its_rows(tmp_path):
    """kgen traces a (..., K) input's module on its rows, a 2-d tensor the user never wrote: the
    refusal said "not enough values to unpack (expected 3, got 2)" or "the size index 2 of a 2-d
    shape" of a 3-d tensor, and nothing of the rows. (Session 61: such a forward is traced with
    the input's leading sizes where it fails on the rows, `B, S, D = x.shape` ... x.view(B * S, D)
    taken: tests/test_spellings_probe61_views.py; a view of them kgen does not take says which.
    Session 62 takes (B, S, H, -1), the rows' heads: tests/test_spellings_probe62_half.py.)"""
    body = "x = self.fc(x)\nb, s, _ = x.shape\nx = x.reshape(b, s, 2, 2, -1).sum(-1).reshape(b, s, -1)"
    ref = reference(tmp_path, source("self.fc = nn.Linear(in_features, out_features)", body, R3))
    with pytest.raises(Unsupported, match=r"reshape\(x\.size\(0\), x\.size\(1\), 2, 2, -1\) of a value whose rows are "
                                          r"\(x\.size\(0\) \* x\.size\(1\), 16\)"):
        trace(ref)


# A parameter of more dimensions than the rows, (1, 1, N) (LayerScale's gamma, a bias kept so),
# on a (batch, tokens, K) input: torch gives (batch, tokens, N); on the rows (R, K) it gives
# (1, R, N). kgen's reshape back took the rows as dimension 0 and failed, refused as "this module
# fails one of the two ways (RuntimeError: shape '[2, 3, 6, 16]' is invalid ...)", kgen's own
# reshape and not the module failing.
WIDE = {
    "layerscale": ("self.fc = nn.Linear(in_features, in_features)\n"
                   "self.gamma = nn.Parameter(0.1 * torch.ones(1, 1, in_features))", "x = x + self.gamma * self.fc(x)", R3),
    "bias_11n": ("self.fc = nn.Linear(in_features, out_features, bias=False)\n"
                 "self.b = nn.Parameter(torch.randn(1, 1, out_features))", "x = F.gelu(self.fc(x) + self.b)", R3),
    "four_d_input": ("self.fc = nn.Linear(in_features, out_features)\n"
                     "self.b = nn.Parameter(torch.randn(1, 1, out_features))", "x = self.fc(x) - self.b", (2, 3, 4, 16)),
    "five_d_parameter": ("self.fc = nn.Linear(in_features, out_features)\n"
                         "self.b = nn.Parameter(torch.randn(1, 1, 1, 1, out_features))", "x = self.fc(x) * self.b", R3),
}


@pytest.mark.parametrize("name", sorted(WIDE))
def test_a_parameter_of_more_dimensions_on_a_3d_input_is_taken(name, tmp_path, monkeypatch):
    from click.testing import CliRunner

    from conftest import launch_on_cpu
    from kgen.check.loading import EmittedFile
    from kgen.cli import main
    from kgen.frontend.trace import rows_at

    init, body, shape = WIDE[name]
    ref = reference(tmp_path, source(init, body, shape))
    graph = trace(ref)
    check_taken(ref, graph)
    # The emitted forward reshapes the kernels' output as rows_output does (shapes: a stand-in library).
    out = tmp_path / "new.py"
    r = CliRunner().invoke(main, ["generate", str(ref.path), "-o", str(out)])
    assert r.exit_code == 0, r.output
    f = EmittedFile(out)
    launch_on_cpu(f.module, monkeypatch)
    monkeypatch.setattr(f.module, "_kgen_checked_input", lambda x, weight: x)
    new, eager = f.ModelNew(*f.init_args()), f.Model(*f.init_args())
    x = torch.randn(*shape)
    with torch.no_grad():
        assert new(x).shape == eager(x).shape
    assert rows_at(graph) == (3 if name == "five_d_parameter" else 1)


@pytest.mark.parametrize("shape", [(8, 16), R3])
def test_a_row_op_of_a_value_a_wider_parameter_broadcast_says_so(shape, tmp_path):
    """(a (1, M, N) value with no input in it was refused as "a value that reads the module's input")"""
    ref = reference(tmp_path, source("self.fc = nn.Linear(in_features, out_features)\n"
                                     "self.b = nn.Parameter(torch.randn(1, 1, out_features))",
                                     "x = (self.fc(x) * self.b).sum(-1)", shape))
    with pytest.raises(Unsupported, match=r"sum of a value of shape \(1, M, 16\), which a parameter of more "
                                          r"dimensions .* give the parameter the shape \(N,\) or \(1, N\)"):
        trace(ref)


@pytest.mark.parametrize("shape", [(8, 16), R3])
def test_a_flatten_into_one_dimension_before_other_ops_says_what_is_taken(shape, tmp_path):
    """(it said "the tensor method .flatten() is not supported", while flatten(1) is taken; of a
    (batch, tokens, K) input's Linear, session 61's trace with its leading sizes says what it is:
    the rows, returned)"""
    ref = reference(tmp_path, source(L, "x = self.fc(x).flatten(0, 1).relu()", shape))
    said = (r"a flatten of a \(batch, features\) value into one dimension before other ops \(kgen takes flatten\(1\)"
            if len(shape) == 2 else r"the forward returns the rows of its \(4, 5, 16\) input, \(B \* S, \.\.\.\)")
    with pytest.raises(Unsupported, match=said):
        trace(ref)
