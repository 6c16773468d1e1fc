"""Session 61's fixes of session 60's probe list ("refused wrongly 35, left": the docstring of
tests/test_spellings_probe60_users.py), CPU: modules within kgen's family that it refused, each
now traced to the IR kgen has and checked as that probe checks (check_taken: the IR against the
module in fp64, training and eval, buffers, gradients against torch.autograd, and in bf16 / fp16
against fp64), each over several ways users write it.

Found and fixed:
- A forward that reads its (batch, tokens, K) input's sizes was refused ("not enough values to
  unpack (expected 3, got 2)": kgen traced it on its rows, a 2-d tensor): `B, S, D = x.shape`,
  x.view(B * S, D) / reshape(-1, D) / flatten(0, 1) into the Linear and .view(B, S, -1) /
  unflatten(0, (B, S)) back; softmax(dim=2) of the 3-d value; BatchNorm1d of h.transpose(1, 2)
  (or permute(0, 2, 1), .mT) transposed back, which is the rows' BatchNorm; einsum('bsi,oi->bso');
  (W @ x.mT).mT. Where the trace on the rows fails, the module is now traced with the input's
  leading sizes (trace._trace_either_way, Tracer.leads): each op of a value with them the same op
  of its rows, its dims mapped to the rows' (the last one), views between the two forms the
  identity, ops over other dimensions or of dimension 1's channels refused by name, and the IR run
  against the module on the input (trace._check_leads). The IR is the rows', so the emitted file
  is as for any (..., K) input. (Its refusals: `test_a_forward_reading_a_3d_inputs_sizes_refused_
  says_why`.)
- F.avg_pool1d / max_pool1d / adaptive_avg_pool1d / nn.AvgPool1d / nn.MaxPool1d of a (batch,
  features) value itself (not its x.unsqueeze(1)) was refused ("MaxPool1d of a value that is not
  x.unsqueeze(1)"). torch takes a 2-d input as one unbatched sample (C, L) and pools each row's
  features, as kgen's pool node does: now the pooled (batch, P) value (Tracer.pool).
- nn.InstanceNorm1d / F.instance_norm of x.unsqueeze(1) (then squeezed), and nn.InstanceNorm1d of
  the (batch, features) value itself (torch's unbatched (C, L)), were refused as unsupported
  modules. Each row normalized over its features with its mean, biased variance and eps: the
  LayerNorm node without affine (fp32 statistics in 16 bits, as torch's instance_norm, which is
  batch_norm of the (1, batch, N) view). track_running_stats=True and affine=True stay refused,
  each saying why (Tracer.instance_norm).
- nn.RReLU / F.rrelu in eval mode (F.rrelu's default training=False) was refused: it is
  leaky_relu of slope (lower + upper) / 2, computed in double as ATen's rrelu_with_noise does.
  In training mode torch draws each negative element's slope; the emitted forward raises there,
  naming it (a graph.dropouts record not reproduced, Tracer._drawn_in_training), and one active in
  eval mode (F.rrelu(x, training=True)) is refused at generation.
- nn.AlphaDropout / nn.FeatureAlphaDropout / F.alpha_dropout / F.feature_alpha_dropout were refused:
  the identity in eval mode; in training the emitted forward raises (torch's mask and affine
  correction are not reproduced), as for a Dropout kgen cannot reproduce.
- `.data` of a parameter or a value was refused ("the attribute .data"): now .detach() (an alias
  for in-place ops, as torch's .data shares the storage).
- torch.ones(1, device=x.device) / torch.zeros / torch.full with a device or dtype read from a
  traced value was refused (fx records the call instead of lifting a constant): now made on the
  host and taken as the tensor made in forward it is (its number; a float32 one of a dimension a
  float32 fact, as torch.tensor([0.5]) is).
- `y * True` / `y + False` ("the constant True is not a number"): torch promotes a Python bool
  beside a tensor as the int 1 / 0 in add, mul and div (y - True raises in torch; kgen says so).
- torch.Tensor.__mul__(x, y) and the operators' other dunders called unbound failed in fx
  ("descriptor '__mul__' ... doesn't apply to a '_Proxy' object"): shadowed while fx traces as the
  unbound named methods are (_LocatingTracer.unbound_methods_traced).
"""

import copy
import warnings

import pytest
import torch

from kgen.frontend.trace import trace
from kgen.ir.graph import Unsupported

from test_spellings_probe60_users import R3, check_taken, reference, source

L = "self.fc = nn.Linear(in_features, out_features)"


def traced(tmp_path, init: str, body: str, shape=(8, 16), **kw):
    ref = reference(tmp_path, source(init, body, shape, **kw))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ref, trace(ref)


# ---- pooling of a (batch, features) value: torch's unbatched (C, L) -----------------------------
POOLS = {
    "F.avg_pool1d(h, 2)": ("", "x = F.avg_pool1d(self.fc(x), 2)"),
    "F.max_pool1d(h, 3, 2)": ("", "x = F.max_pool1d(self.fc(x), 3, 2)"),
    "F.max_pool1d(h, kernel_size=4, stride=4) after relu": ("", "x = F.max_pool1d(torch.relu(self.fc(x)), kernel_size=4, stride=4)"),
    "torch.max_pool1d(h, 2)": ("", "x = torch.max_pool1d(self.fc(x), 2)"),
    "nn.AvgPool1d(4) module": ("self.pool = nn.AvgPool1d(4)", "x = self.pool(self.fc(x))"),
    "nn.MaxPool1d(2, 2) module, then a scale": ("self.pool = nn.MaxPool1d(2, 2)", "x = self.pool(self.fc(x)) * 2.0"),
    "F.adaptive_avg_pool1d(h, 4)": ("", "x = F.adaptive_avg_pool1d(self.fc(x), 4)"),
    "nn.AdaptiveMaxPool1d(8) then sum": ("self.pool = nn.AdaptiveMaxPool1d(8)", "x = self.pool(self.fc(x)).sum(-1)"),
}


@pytest.mark.parametrize("shape", [(8, 16), R3], ids=["2d", "3d"])
@pytest.mark.parametrize("name", sorted(POOLS))
def test_pooling_a_2d_value_pools_each_rows_features(name, shape, tmp_path):
    init, body = POOLS[name]
    ref, graph = traced(tmp_path, L + ("\n" + init if init else ""), body, shape)
    (pool,) = [n for n in graph.nodes if n.kind == "pool"]
    assert graph.node(pool.args[0]).level == "tile"
    check_taken(ref, graph)


def test_pooling_a_2d_value_twice_is_still_refused(tmp_path):
    with pytest.raises(Unsupported, match=r"a second pooling \(kgen supports one pooling per module\)"):
        traced(tmp_path, L, "x = F.max_pool1d(F.avg_pool1d(self.fc(x), 2), 2)")


# ---- InstanceNorm1d of the rows -----------------------------------------------------------------
INSTANCE_NORMS = {
    "nn.InstanceNorm1d(1) of unsqueeze(1), squeeze(1)": ("self.norm = nn.InstanceNorm1d(1)",
                                                         "x = self.norm(self.fc(x).unsqueeze(1)).squeeze(1)"),
    "nn.InstanceNorm1d(1, eps=1e-3) of h[:, None], flatten(1)": ("self.norm = nn.InstanceNorm1d(1, eps=1e-3)",
                                                                 "x = self.norm(self.fc(x)[:, None]).flatten(1)"),
    "F.instance_norm of unsqueeze(1), then gelu": ("", "x = F.gelu(F.instance_norm(self.fc(x).unsqueeze(1)).squeeze(1))"),
    "F.instance_norm(eps=) of view(B, 1, -1)": ("", "h = self.fc(x)\nx = F.instance_norm(h.view(h.size(0), 1, -1), eps=1e-4).squeeze(1)"),
    "nn.InstanceNorm1d of the 2-d value (unbatched C, L)": ("self.norm = nn.InstanceNorm1d(8)", "x = self.norm(self.fc(x))"),
}


@pytest.mark.parametrize("name", sorted(INSTANCE_NORMS))
def test_instance_norm_of_the_rows_is_their_layer_norm_without_affine(name, tmp_path):
    init, body = INSTANCE_NORMS[name]
    ref, graph = traced(tmp_path, L + ("\n" + init if init else ""), body)
    (norm,) = [n for n in graph.nodes if n.kind == "groupnorm"]
    assert norm.attrs["groups"] == 1 and norm.attrs["layer"] and not norm.attrs["weight"] and not norm.attrs["bias"]
    check_taken(ref, graph)


def test_instance_norm_of_a_3d_inputs_rows(tmp_path):
    """On a (batch, tokens, K) input, nn.InstanceNorm1d of the Linear's (batch, tokens, N) output
    normalizes each token's features (C = tokens, L = N): the rows' normalization again."""
    ref, graph = traced(tmp_path, L + "\nself.norm = nn.InstanceNorm1d(5)", "x = self.norm(self.fc(x))", R3)
    check_taken(ref, graph)


@pytest.mark.parametrize("init, body, message", [
    ("self.norm = nn.InstanceNorm1d(1, track_running_stats=True)", "x = self.norm(self.fc(x).unsqueeze(1)).squeeze(1)",
     r"InstanceNorm1d\) with running statistics \(track_running_stats=True"),
    # (affine=True of x.unsqueeze(1) is taken since session 62: tests/test_spellings_probe62_half.py;
    # of the (batch, features) value itself, a weight per row, refused)
    ("self.norm = nn.InstanceNorm1d(8, affine=True)", "x = self.norm(self.fc(x))",
     r"InstanceNorm1d\) of the \(batch, features\) value itself with affine=True"),
    ("self.register_buffer('rm', torch.zeros(1))\nself.register_buffer('rv', torch.ones(1))",
     "x = F.instance_norm(self.fc(x).unsqueeze(1), self.rm, self.rv).squeeze(1)", r"instance_norm with running statistics"),
    ("", "x = F.instance_norm(self.fc(x))", r"instance_norm of a value that is not x\.unsqueeze\(1\)"),   # (torch raises)
    ("self.norm = nn.InstanceNorm1d(1)", "x = self.norm(self.fc(x).unsqueeze(1)).squeeze(1)", r"over one feature"),
])
def test_instance_norm_kgen_does_not_take_says_why(init, body, message, tmp_path):
    out = "16, 1" if "over one feature" in message else "16, 16"
    with pytest.raises(Unsupported, match=message):
        traced(tmp_path, L + ("\n" + init if init else ""), body, args=out)


# ---- RReLU and alpha dropout: their eval mode; training mode refused by the emitted forward -----
EVAL_ONLY = {
    "nn.RReLU()": ("self.act = nn.RReLU()", "x = self.act(self.fc(x))", "RReLU(lower=0.125, upper=0.333333)"),
    "nn.RReLU(0.1, 0.3)": ("self.act = nn.RReLU(0.1, 0.3)", "x = torch.tanh(self.act(self.fc(x)))", "RReLU(lower=0.1, upper=0.3)"),
    "F.rrelu(training=self.training)": ("", "x = F.rrelu(self.fc(x), 0.2, 0.4, training=self.training)",
                                        "RReLU(lower=0.2, upper=0.4)"),
    "nn.AlphaDropout(0.2) after SELU": ("self.drop = nn.AlphaDropout(0.2)", "x = self.drop(F.selu(self.fc(x)))", "AlphaDropout(p=0.2)"),
    "nn.FeatureAlphaDropout(0.1)": ("self.drop = nn.FeatureAlphaDropout(0.1)", "x = self.drop(self.fc(x))",
                                    "FeatureAlphaDropout(p=0.1)"),
    "F.alpha_dropout(p, self.training)": ("", "x = F.alpha_dropout(self.fc(x), 0.3, self.training)", "AlphaDropout(p=0.3)"),
    "F.feature_alpha_dropout(training=)": ("", "x = F.feature_alpha_dropout(self.fc(x), p=0.3, training=self.training)",
                                           "FeatureAlphaDropout(p=0.3)"),
}


@pytest.mark.parametrize("name", sorted(EVAL_ONLY))
def test_random_in_training_is_its_eval_mode_and_refused_in_training(name, tmp_path):
    init, body, said = EVAL_ONLY[name]
    ref, graph = traced(tmp_path, L + ("\n" + init if init else ""), body)
    (d,) = graph.dropouts
    assert d["name"] == said and not d["reproduced"]
    check_taken(ref, graph)   # (eval mode only: graph.dropouts)


@pytest.mark.parametrize("body", ["x = F.rrelu(self.fc(x))", "x = F.alpha_dropout(self.fc(x), 0.5)",
                                  "x = F.rrelu(self.fc(x), training=False) + F.alpha_dropout(x, training=False)"])
def test_rrelu_and_alpha_dropout_at_their_default_training_false_are_taken_in_both_modes(body, tmp_path):
    """(F.rrelu and F.alpha_dropout default to training=False, unlike F.dropout)"""
    ref, graph = traced(tmp_path, L, body, args="16, 16")
    assert graph.dropouts == []
    check_taken(ref, graph)


@pytest.mark.parametrize("body, message", [
    ("x = F.rrelu(self.fc(x), training=True)", r"RReLU\(lower=0\.125, upper=0\.333333\) is active in eval mode"),
    ("x = F.alpha_dropout(self.fc(x), 0.2, True)", r"AlphaDropout\(p=0\.2\) is active in eval mode .* torch's AlphaDropout mask"),
    ("x = F.rrelu(self.fc(x), 0.5, 0.1)", r"RReLU with lower=0\.5, upper=0\.1"),
    ("x = F.alpha_dropout(self.fc(x), 0.2, self.training, inplace=True)", r"alpha_dropout with inplace=True"),
])
def test_random_in_eval_mode_is_refused(body, message, tmp_path):
    with pytest.raises(Unsupported, match=message):
        traced(tmp_path, L, body)


def test_the_emitted_forward_raises_in_training_mode_and_runs_in_eval(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from conftest import launch_on_cpu
    from kgen.check.loading import EmittedFile
    from kgen.cli import main

    ref = reference(tmp_path, source(L + "\nself.act = nn.RReLU(0.1, 0.3)\nself.drop = nn.AlphaDropout(0.2)",
                                     "x = F.avg_pool1d(self.drop(self.act(self.fc(x))), 4)"))
    out = tmp_path / "new.py"
    r = CliRunner().invoke(main, ["generate", str(ref.path), "-o", str(out)])
    assert r.exit_code == 0, r.output
    f = EmittedFile(out)
    assert not f.runs_in_training
    launch_on_cpu(f.module, monkeypatch)
    monkeypatch.setattr(f.module, "_kgen_checked_input", lambda x, weight: x)
    new = f.ModelNew(*f.init_args())
    x = torch.randn(8, 16)
    with pytest.raises(RuntimeError, match=r"RReLU\(lower=0\.1, upper=0\.3\) \(line \d+ of the reference\) draws at "
                                           r"random in training mode.* where it is leaky_relu with the slope"):
        new.train()(x)
    new.act.eval()
    with pytest.raises(RuntimeError, match=r"AlphaDropout\(p=0\.2\) .* draws at random in training mode"):
        new(x)
    with torch.no_grad():
        assert new.eval()(x).shape == (8, 4)   # (the stand-in library's values: shapes only)


# ---- .data, tensors made on the input's device, bools, unbound dunders --------------------------
SMALL = {
    ".data of a parameter": ("self.s = nn.Parameter(torch.rand(out_features) + 0.5)", "x = self.fc(x) * self.s.data"),
    ".data of the Linear's bias, read as a value": ("", "h = self.fc(x)\nx = h - self.fc.bias.data"),
    ".data of a value": ("", "h = self.fc(x)\nx = torch.tanh(h.data) + h"),
    "torch.ones(1, device=, dtype=x.dtype)": ("", "x = self.fc(x) * torch.ones(1, device=x.device, dtype=x.dtype)"),
    "torch.full((), 2.0, device=)": ("", "x = self.fc(x) + torch.full((), 2.0, device=x.device)"),
    "torch.zeros([], device=) as a clamp bound": ("", "h = self.fc(x)\nx = torch.maximum(h, torch.zeros([], device=h.device))"),
    "torch.tensor(2.0, device=)": ("", "x = self.fc(x) / torch.tensor(2.0, device=x.device)"),
    "y * True": ("", "x = self.fc(x) * True"),
    "y + False, True / y": ("", "h = self.fc(x)\nx = (h + False) * (True / (h.abs() + 1))"),
    "torch.Tensor.__mul__(y, 2.0)": ("", "x = torch.Tensor.__mul__(self.fc(x), 2.0)"),
    "torch.Tensor.__add__ and __rmul__": ("self.b = nn.Parameter(torch.randn(out_features))",
                                          "h = self.fc(x)\nx = torch.Tensor.__rmul__(torch.Tensor.__add__(h, self.b), 3.0)"),
    "torch.Tensor.__truediv__ and __matmul__": ("self.w = nn.Parameter(torch.randn(16, 16) / 4)",
                                                "x = torch.Tensor.__truediv__(torch.Tensor.__matmul__(x, self.w.t()), 2.0)"),
}


@pytest.mark.parametrize("shape", [(8, 16), R3], ids=["2d", "3d"])
@pytest.mark.parametrize("name", sorted(SMALL))
def test_small_spellings_are_taken(name, shape, tmp_path):
    init, body = SMALL[name]
    ref, graph = traced(tmp_path, L + ("\n" + init if init else ""), body, shape)
    check_taken(ref, graph)


def test_a_gradient_does_not_flow_through_data(tmp_path):
    ref, graph = traced(tmp_path, L + "\nself.s = nn.Parameter(torch.rand(out_features) + 0.5)",
                        "x = self.fc(x) * self.s.data")
    assert any(n.op == "detach" for n in graph.nodes)


def test_torch_ones_of_the_default_dtype_is_a_float32_fact(tmp_path):
    """torch.ones(1) is float32 and of a dimension: it promotes a 16-bit y as a tensor (eager's
    output float32), as torch.tensor([0.5]) does; kgen's file runs float32 modules only, saying so."""
    ref, graph = traced(tmp_path, L, "x = self.fc(x) * torch.ones(1, device=x.device)")
    assert graph.fp32_casts
    with pytest.raises(Unsupported, match=r"a torch.float32 tensor of shape \(1,\) made in forward in a torch.bfloat16 module"):
        traced(tmp_path, "self.fc = nn.Linear(in_features, out_features, dtype=torch.bfloat16)",
               "x = self.fc(x) * torch.ones(1, device=x.device)", dtype="bfloat16")


@pytest.mark.parametrize("body, message", [
    # (a write through .data, as through .detach(), refused: torch's writes the tensor itself)
    ("h = self.fc(x)\nh.data.mul_(2.0)\nx = h", r"an in-place op on a value that shares its storage with a detached"),
    ("x = self.fc(x)\nself.fc.weight.data.mul_(2.0)", r"an in-place op on a value that shares its storage with a detached"),
    ("x = self.fc(x) - True", r"sub of a tensor and a Python bool"),
    ("x = self.fc(x) * torch.ones(2, 16, device=x.device)", r"a tensor of shape \(2, 16\) made in forward"),
    ("h = self.fc(x)\nx = h * torch.ones(h.shape[1], device=h.device)", r"a tensor of shape \(16,\) made in forward"),
])
def test_writes_through_data_and_what_torch_refuses(body, message, tmp_path):
    with pytest.raises(Unsupported, match=message):
        traced(tmp_path, L, body)


# ---- a forward that reads a 3-d input's sizes: traced with them (Tracer.leads) -------------------
LN = "self.ln = nn.LayerNorm(out_features)"
BN = "self.bn = nn.BatchNorm1d(out_features)"
W = "self.w = nn.Parameter(torch.randn(out_features, in_features) / 4)"
LEAD_VIEWS = {
    "B, S, D = x.shape; view(B * S, D); view(B, S, -1)": (L, "B, S, D = x.shape\nx = self.fc(x.view(B * S, D)).view(B, S, -1)"),
    "x.size(); reshape(b * s, d); relu; reshape(b, s, -1)": (
        L, "b, s, d = x.size()\nh = torch.relu(self.fc(x.reshape(b * s, d)))\nx = h.reshape(b, s, -1)"),
    "reshape(-1, x.size(-1)); view(x.size(0), x.size(1), -1)": (L, "x = self.fc(x.reshape(-1, x.size(-1))).view(x.size(0), x.size(1), -1)"),
    "view(-1, shape[-1]); gelu; view(*shape[:-1], -1)": (L, "shape = x.shape\nx = self.fc(x.view(-1, shape[-1]))\nx = F.gelu(x).view(*shape[:-1], -1)"),
    "flatten(0, 1); unflatten(0, (b, -1))": (L, "b = x.shape[0]\nx = self.fc(x.flatten(0, 1)).relu().unflatten(0, (b, -1))"),
    "torch.flatten(x, 0, 1); LayerNorm; view(*lead, -1)": (L + "\n" + LN, "lead = x.shape[:-1]\nx = self.ln(self.fc(torch.flatten(x, 0, 1))).view(*lead, -1)"),
    "softmax(dim=2) of the 3-d value, h.shape read": (L, "h = self.fc(x)\nB, S, N = h.shape\nx = h.softmax(dim=2).reshape(B * S, N).view(B, S, N)"),
    "h - h.mean(dim=2, keepdim=True), var(dim=-1)": (
        L, "B, S, _ = x.shape\nh = self.fc(x)\nh = h - h.mean(dim=2, keepdim=True)\nx = h / torch.sqrt(h.var(dim=-1, keepdim=True) + 1e-5)"),
    "amax(dim=2) of the 3-d value, a (B, S) output": (L, "B, S, D = x.shape\nx = self.fc(x).amax(dim=2)"),
    "x.contiguous(), ones_like, where of a comparison and zeros_like": (
        L, "B, S, D = x.shape\nh = self.fc(x.contiguous())\nx = torch.ones_like(h) * h + torch.where(h > 0, h, torch.zeros_like(h))"),
    "in place on the 3-d value and its rows": (L, "B, S, D = x.shape\nh = self.fc(x)\nr = h.view(B * S, -1)\nr.mul_(2.0)\nx = torch.tanh(h)"),
    "BatchNorm1d of transpose(1, 2), back": (L + "\n" + BN, "x = self.bn(self.fc(x).transpose(1, 2)).transpose(1, 2)"),
    "BatchNorm1d of permute(0, 2, 1), relu, back": (L + "\n" + BN, "h = self.fc(x).permute(0, 2, 1)\nx = F.relu(self.bn(h)).permute(0, 2, 1)"),
    "BatchNorm1d of .mT, scaled, back": (L + "\n" + BN, "x = (self.bn(self.fc(x).mT) * 0.5).mT"),
    "BatchNorm1d of transpose(-1, -2), back with swapaxes": (L + "\nself.bn = nn.BatchNorm1d(out_features, momentum=None)",
                                                             "x = self.bn(self.fc(x).transpose(-1, -2)).swapaxes(1, 2)"),
    "einsum('bsi,oi->bso')": (W, "x = torch.einsum('bsi,oi->bso', x, self.w)"),
    "einsum('bti,ji->btj') + a bias, gelu": (W + "\nself.b = nn.Parameter(torch.randn(out_features))",
                                             "x = F.gelu(torch.einsum('bti,ji->btj', x, self.w) + self.b)"),
    "(W @ x.mT).mT": (W, "x = (self.w @ x.mT).mT"),
    "(W @ x.transpose(1, 2)).transpose(1, 2), then softmax(-1)": (W, "x = torch.softmax((self.w @ x.transpose(1, 2)).transpose(1, 2), -1)"),
}


# (a forward that runs on its rows as well, x.shape being (rows, K) there: traced on them, as before)
ON_ROWS = {"view(-1, shape[-1]); gelu; view(*shape[:-1], -1)"}


@pytest.mark.parametrize("name", sorted(LEAD_VIEWS))
def test_a_forward_reading_a_3d_inputs_sizes(name, tmp_path):
    init, body = LEAD_VIEWS[name]
    ref, graph = traced(tmp_path, init, body, R3)
    assert graph.leads == (0 if name in ON_ROWS else 2)
    check_taken(ref, graph)


@pytest.mark.parametrize("name", sorted(set(LEAD_VIEWS) - ON_ROWS))
def test_the_checks_call_a_forward_reading_its_sizes_on_rows(name, tmp_path):
    """kgen's checks, bench and search call the reference with the workload's rows (R, K); a forward
    that reads its input's leading sizes cannot run on them, so the model the checks use
    (Reference.given_extra_inputs) gives it the rows as one sample, (1, R, K), and its output back as
    the rows' (on the GPU, the gate failed with "not enough values to unpack" before)."""
    init, body = LEAD_VIEWS[name]
    ref, graph = traced(tmp_path, init, body, R3)
    torch.manual_seed(0)
    model = ref.given_extra_inputs(ref.Model)(*ref.init_args()).double().eval()
    x = torch.randn(7, R3[-1], dtype=torch.float64)
    with torch.no_grad():
        got = model(x)
        want = graph.interpret(x, copy.deepcopy(model))
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-11)


def test_a_4d_input_read_with_its_three_leading_sizes(tmp_path):
    ref, graph = traced(tmp_path, L, "a, b, c, d = x.shape\nx = self.fc(x.reshape(a * b * c, d)).relu().view(a, b, c, -1)",
                        (2, 3, 4, 16))
    assert graph.leads == 3
    check_taken(ref, graph)


@pytest.mark.parametrize("body, message", [
    ("B, S, D = x.shape\nx = self.fc(x.view(B * S, D))", r"returns the rows of its \(4, 5, 16\) input, \(B \* S, \.\.\.\)"),
    ("B, S, D = x.shape\nx = self.fc(x).mean(dim=1)", r"mean over dim=1 of a value of 3 dimensions"),
    ("B, S, D = x.shape\nx = self.fc(x) / S", r"a leading size of the input \(B, S, D = x\.shape\) used as a number"),
    ("B, S, D = x.shape\nx = self.fc(x).view(B, -1)", r"view\(x\.size\(0\), -1\) of a value whose rows are \(x\.size\(0\) \* x\.size\(1\), 16\)"),
    ("B, S, D = x.shape\nx = F.softmax(self.fc(x))", r"softmax without a dim of a value of 3 dimensions"),
    ("B, S, D = x.shape\nx = F.normalize(self.fc(x))", r"F\.normalize over dim=1 of a value of 3 dimensions"),
    ("B, S, D = x.shape\nx = self.bn(self.fc(x))", r"BatchNorm1d of a value of 3 dimensions"),
    ("B, S, D = x.shape\nx = self.act(self.fc(x))", r"PReLU of one weight per channel of a value of 3 dimensions"),
    ("B, S, D = x.shape\nx = self.gn(self.fc(x))", r"GroupNorm of a value of 3 dimensions"),
    ("B, S, D = x.shape\nx = self.fc(x).transpose(0, 1)", r"transpose of a value with the input's leading sizes"),
    ("B, S, D = x.shape\nx = self.bn(self.fc(x).transpose(1, 2)).sum(-1)", r"sum over dim=-1 of a value of 2 dimensions"),
    ("B, S, D = x.shape\nh = self.fc(x)\nx = h.view(B * S, -1) + h", r"add of a value with the input's leading sizes and one of its rows"),
])
def test_a_forward_reading_a_3d_inputs_sizes_refused_says_why(body, message, tmp_path):
    with pytest.raises(Unsupported, match=message):
        traced(tmp_path, L + "\n" + BN + "\nself.act = nn.PReLU(out_features)\nself.gn = nn.GroupNorm(4, out_features)",
               body, R3)


def test_the_emitted_file_of_a_forward_reading_its_sizes_gives_the_modules_shape(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from conftest import launch_on_cpu
    from kgen.check.loading import EmittedFile
    from kgen.cli import main

    ref = reference(tmp_path, source(L + "\n" + BN, "B, S, D = x.shape\nh = self.fc(x.view(B * S, D))\n"
                                     "x = self.bn(h.view(B, S, -1).transpose(1, 2)).transpose(1, 2)", R3))
    out = tmp_path / "new.py"
    r = CliRunner().invoke(main, ["generate", str(ref.path), "-o", str(out)])
    assert r.exit_code == 0, r.output
    f = EmittedFile(out)
    launch_on_cpu(f.module, monkeypatch)
    monkeypatch.setattr(f.module, "_kgen_checked_input", lambda x, weight: x)
    new, eager = f.ModelNew(*f.init_args()), f.Model(*f.init_args())
    x = torch.randn(*R3)
    with torch.no_grad():
        assert new.eval()(x).shape == eager.eval()(x).shape == R3
    # A batch of one row in training: torch's BatchNorm1d error names its (B, N, S) input, and so
    # does the file's (the gate compares the two messages; session 61's call C).
    one = torch.randn(1, 1, R3[-1])
    with pytest.raises(ValueError) as theirs:
        eager.train()(one)
    with pytest.raises(ValueError) as ours:
        new.train()(one)
    assert str(ours.value) == str(theirs.value)
