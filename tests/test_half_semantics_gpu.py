"""GPU tier of session 61's 16-bit semantics (the CPU side: tests/test_spellings_probe61_half.py):
ModelNew in bf16 / fp16 against eager CUDA, where kgen now computes as torch's CUDA kernels do:
- a sum / mean of everything: the rows' sums written in fp32 (kgen_cfg::kFp32Value) and torch's
  own sum of them rounded once, as torch's reduction accumulates every element in fp32 (before:
  each row's sum rounded first, 0 where eager gives 32 on rows that cancel);
- comparisons with a number: the number rounded to the module's dtype in the kernels, as CUDA's
  compare and threshold kernels read it (before: compared in fp32, another answer at y = bf16(0.1));
- torch.addmm's alpha and beta: alpha * acc + beta * b in fp32 and rounded once, as cuBLAS's
  epilogue computes it (before: beta * b rounded first).
Session 62's (the CPU side: tests/test_spellings_probe62_half.py):
- torch.add / sub with alpha and addcmul: a + alpha * b in fp32 and rounded once, as torch's
  AddFunctor<opmath_t> and addcmul's accscalar_t kernel (before: alpha * b rounded first);
- the backward's comparisons (where's mask, clamp's and hardtanh's bounds) of the values as the
  forward held them, rounded to the module's dtype (before: the unrounded recomputation, compared
  with the number as it is: the gradient on the other side of the forward's choice);
- a LayerNorm of GLU's gate (written with row reductions over its P columns; refused before);
- InstanceNorm1d(1, affine=True): the norm of the upcast rows, scale and shift, rounded once."""

from pathlib import Path

import pytest
import torch

from kgen.check.loading import EmittedFile
from kgen.codegen import generator
from kgen.tune.search import Candidate, build_all
from kgen.tune.spec import Spec, Tile

from conftest import reference_text

pytestmark = pytest.mark.gpu

HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
IDENTITY = ["self.fc = nn.Linear(in_features, out_features)"]
# Each term's gradient a power of two, so that dz tells every comparison's outcome apart.
BACKWARD_COMPARISONS = ("x = torch.where(y > 0.1, y, 0.0) + 2 * torch.where(y >= 0.1, y, 0.0) + 4 * torch.clamp(y, -0.2, 0.6)"
                        " + 8 * F.hardtanh(y, -0.3, 0.7) + 16 * torch.where(y < 0.3, y, 0.0)")
# name -> (init lines, forward lines, backend): the modules, each at batch 64, 16 -> 128
MODULES = {
    "sum": (IDENTITY, ["x = self.fc(x).sum()"], "wgmma"),
    "mean": (IDENTITY, ["x = self.fc(x).mean()"], "wgmma"),
    "sum_gemv": (IDENTITY, ["x = self.fc(x).sum()"], "gemv"),
    "comparisons": (IDENTITY, ["y = self.fc(x)", "x = y * (y > 0.1) + F.threshold(y, 0.3, -2.0) + y.masked_fill(y == 0.7, 5.0)"],
                    "wgmma"),
    "addmm": (["self.w = nn.Parameter(torch.randn(out_features, in_features) / 4)",
               "self.b = nn.Parameter(torch.randn(out_features))"],
              ["x = torch.addmm(self.b, x, self.w.t(), beta=0.3, alpha=0.7)"], "wgmma"),
    "alpha": (IDENTITY, ["y = self.fc(x)", "x = torch.add(y, y * y, alpha=0.3) + torch.addcmul(y, y, y, value=-0.7)"],
              "wgmma"),
    "backward_comparisons": (IDENTITY, ["y = self.fc(x)", BACKWARD_COMPARISONS], "wgmma"),
    "gated_layer_norm": ([*IDENTITY, "self.norm = nn.LayerNorm(64)"],
                         ["a, b = self.fc(x).chunk(2, -1)", "x = self.norm(F.silu(a) * b)"], "wgmma"),
    "instance_affine": ([*IDENTITY, "self.norm = nn.InstanceNorm1d(1, affine=True)"],
                        ["x = self.norm(self.fc(x).unsqueeze(1)).squeeze(1)"], "wgmma"),
}


def spec_for(path: Path, backend: str) -> Spec:
    if backend == "gemv":
        return Spec.of(str(path), 64, 16, 128, math="fp32_simt", backend="gemv", fusion=1)
    return Spec.of(str(path), 64, 16, 128, math="tf32x3", backend="wgmma", fusion=1,
                   tile=Tile(128, 128, 32, 16, 128, stages=4))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    if not HOPPER:
        return {}
    d = tmp_path_factory.mktemp("half_semantics")
    candidates = []
    for name, (init, body, backend) in MODULES.items():
        ref = d / f"{name}.py"
        ref.write_text(reference_text(init, body, 128))
        spec = spec_for(ref, backend)
        candidates.append(Candidate(spec, generator.write(spec, d / f"{name}_new.py")))
    for dtype in DTYPES:
        build_all(candidates, 16, 600, lambda line: None, dtype=dtype)
    return {name: c.path for name, c in zip(MODULES, candidates)}


def pair(f: EmittedFile, dtype, identity: bool):
    """The reference and ModelNew in dtype with the same parameters (the Linear the identity on
    the first 16 features and 0 on the rest, so that y is x beside zeros, where `identity`)."""
    torch.manual_seed(0)
    with torch.device("cuda"):
        ref = f.Model(*f.init_args()).to(dtype)
        new = f.ModelNew(*f.init_args()).to(dtype)
    if identity:
        with torch.no_grad():
            ref.fc.weight.copy_(torch.eye(128, 16))
            ref.fc.bias.zero_()
    new.load_state_dict(ref.state_dict())
    return ref, new


def cancelling_rows(dtype) -> torch.Tensor:
    """Rows whose sums are 1001 and -1000 in turn (each rounds to +-1000 in bf16): eager's sum of
    everything is 32, the rows' rounded sums' 0."""
    x = torch.zeros(64, 16, device="cuda")
    x[0::2, 0], x[0::2, 1], x[1::2, 0] = 1000.0, 1.0, -1000.0
    return x.to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["sum", "mean", "sum_gemv"])
def test_a_sum_of_everything_rounds_once(files, name, dtype):
    if not HOPPER:
        pytest.skip("the 16-bit GEMM is kgen's Hopper wgmma kernel")
    f = EmittedFile(files[name])
    ref, new = pair(f, DTYPES[dtype], identity=True)
    x = cancelling_rows(DTYPES[dtype])
    with torch.no_grad():
        eager, out = ref(x), new(x)
    assert out.dtype == eager.dtype and torch.equal(out, eager), (out, eager)
    # random values: within a step of eager's result (fp32 sums in another order), and the gradients
    ref, new = pair(f, DTYPES[dtype], identity=False)
    x = torch.randn(64, 16, device="cuda", dtype=DTYPES[dtype], requires_grad=True)
    xe = x.detach().clone().requires_grad_(True)
    out, eager = new(x), ref(xe)
    assert (out.double() - eager.double()).abs().item() <= torch.finfo(DTYPES[dtype]).eps * eager.abs().item() * 2
    out.backward()
    eager.backward()
    torch.testing.assert_close(x.grad, xe.grad, rtol=1e-2, atol=1e-2)
    for (n, p), q in zip(new.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-2, atol=1e-2, msg=n)


@pytest.mark.parametrize("dtype", DTYPES)
def test_comparisons_with_a_number_compare_in_the_modules_dtype(files, dtype):
    """At y on the numbers rounded to the dtype and a step either side: ModelNew's output is
    eager's, bit for bit (y is x: the identity Linear)."""
    if not HOPPER:
        pytest.skip("the 16-bit GEMM is kgen's Hopper wgmma kernel")
    dt = DTYPES[dtype]
    f = EmittedFile(files["comparisons"])
    ref, new = pair(f, dt, identity=True)
    numbers = torch.tensor([0.1, 0.3, 0.7], dtype=dt)
    up, down = ((numbers.view(torch.int16) + k).view(dt) for k in (1, -1))
    x = torch.cat([numbers, up, down, torch.linspace(-1, 1, 7).to(dt)]).repeat(64, 1).cuda()
    with torch.no_grad():
        assert torch.equal(new(x), ref(x))


@pytest.mark.parametrize("dtype", DTYPES)
def test_addmm_rounds_once_after_alpha_and_beta(files, dtype):
    """Against eager (cuBLAS: alpha * acc + beta * b in fp32, rounded once): kgen's GEMM sums in
    another order, so not bit for bit, but at most a step of the output from it, and from the
    emulation of one rounding on the fp64 product."""
    if not HOPPER:
        pytest.skip("the 16-bit GEMM is kgen's Hopper wgmma kernel")
    dt = DTYPES[dtype]
    f = EmittedFile(files["addmm"])
    ref, new = pair(f, dt, identity=False)
    x = (torch.randn(64, 16, device="cuda") * 3).to(dt)
    with torch.no_grad():
        eager, out = ref(x), new(x)
        once = (0.7 * (x.double() @ ref.w.double().t()) + 0.3 * ref.b.double()).to(dt)
    step = torch.finfo(dt).eps * eager.double().abs()
    assert ((out.double() - eager.double()).abs() <= step + 1e-6).all()
    assert ((out.double() - once.double()).abs() <= step + 1e-6).all()
    assert (out == once).double().mean().item() >= 0.95


@pytest.mark.parametrize("dtype", DTYPES)
def test_add_with_alpha_and_addcmul_round_once(files, dtype):
    """y + alpha * (y * y rounded) and y + value * y * y, each in fp32 and rounded once, as eager's
    kernels: ModelNew's output eager's (y is x: the identity Linear) but where nvcc contracts the
    product and sum into an fma on one side only (a double rounding; at most one step). Before: a
    step off on a sixth of the elements."""
    if not HOPPER:
        pytest.skip("the 16-bit GEMM is kgen's Hopper wgmma kernel")
    dt = DTYPES[dtype]
    f = EmittedFile(files["alpha"])
    ref, new = pair(f, dt, identity=True)
    torch.manual_seed(1)
    x = (torch.randn(64, 16, device="cuda") * 2).to(dt)
    with torch.no_grad():
        eager, out = ref(x), new(x)
    assert (out == eager).double().mean().item() >= 0.999, (out != eager).sum()
    assert ((out.double() - eager.double()).abs() <= torch.finfo(dt).eps * eager.double().abs() * 2).all()


def held_values(dt) -> tuple[torch.Tensor, torch.Tensor]:
    """(x, W): each row's first 15 features the numbers the module compares with, rounded to dt,
    and a step either side, cycled; feature 15 a sixteenth of a step at 0.1 (+, -, 0 by rows),
    which W adds to each of the first 15 outputs: z is then no 16-bit number, and the forward's
    y, z rounded, is the number itself."""
    numbers = torch.tensor([0.1, 0.3, -0.2, 0.6, -0.3, 0.7], dtype=dt)
    up, down = ((numbers.view(torch.int16) + k).view(dt) for k in (1, -1))
    pool = torch.cat([numbers, up, down])
    x = torch.zeros(64, 16, dtype=dt)
    for r in range(64):
        x[r, :15] = pool[(torch.arange(15) + r) % len(pool)]
        x[r, 15] = (0.0, 2.0 ** -17, -(2.0 ** -17))[r % 3]
    w = torch.zeros(128, 16)
    w[:15, :15] = torch.eye(15)
    w[:15, 15] = 1.0
    return x.cuda(), w.to(dt).cuda()


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_backward_compares_values_as_the_forward_held_them(files, dtype):
    """At y on the compared numbers rounded to the dtype and a step either side, z a little off
    them: the forward and every gradient eager's, bit for bit (dz tells each comparison's outcome
    apart: each term's gradient is its own power of two; W's columns add z's offset)."""
    if not HOPPER:
        pytest.skip("the 16-bit GEMM is kgen's Hopper wgmma kernel")
    dt = DTYPES[dtype]
    f = EmittedFile(files["backward_comparisons"])
    ref, new = pair(f, dt, identity=False)
    x, w = held_values(dt)
    with torch.no_grad():
        ref.fc.weight.copy_(w)
        ref.fc.bias.zero_()
        new.fc.weight.copy_(w)
        new.fc.bias.zero_()
    xe, xn = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    eager, out = ref(xe), new(xn)
    assert torch.equal(out, eager)
    eager.backward(torch.ones_like(eager))
    out.backward(torch.ones_like(out))
    assert torch.equal(xn.grad, xe.grad), (xn.grad != xe.grad).sum()
    assert torch.equal(new.fc.bias.grad, ref.fc.bias.grad), (new.fc.bias.grad, ref.fc.bias.grad)
    assert torch.equal(new.fc.weight.grad, ref.fc.weight.grad)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["gated_layer_norm", "instance_affine"])
def test_a_norm_taken_this_session(files, name, dtype):
    """nn.LayerNorm(P) of silu(a) * b, InstanceNorm1d(1, affine=True) of y.unsqueeze(1): the
    output within a step or two of eager's (fp32 statistics in another order, rounded once as
    eager's kernels), the gradients of x and every parameter as near an fp64 copy's as eager's
    (the gate's rule: HALF_ERROR_FACTOR times eager's worst error, plus a step of the dtype).
    Not near eager's own: a bf16 dW sums 64 rows' products each a step off in eager (its chain
    rounds at every op, kgen's once), so the two differ by more than 2e-2 where dW is near 0."""
    from kgen.check.validate import HALF_ERROR_FACTOR

    if not HOPPER:
        pytest.skip("the 16-bit GEMM is kgen's Hopper wgmma kernel")
    dt = DTYPES[dtype]
    f = EmittedFile(files[name])
    ref, new = pair(f, dt, identity=False)
    if name == "instance_affine":
        with torch.no_grad():
            ref.norm.weight.fill_(1.37)
            ref.norm.bias.fill_(-0.21)
        new.load_state_dict(ref.state_dict())
    torch.manual_seed(1)
    x = (torch.randn(64, 16, device="cuda") * 3).to(dt)
    xe, xn = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    eager, out = ref(xe), new(xn)
    step = torch.finfo(dt).eps * eager.double().abs().clamp_min(1.0)
    assert ((out.double() - eager.double()).abs() <= 2 * step).all()
    g = torch.randn_like(eager)
    eager.backward(g)
    out.backward(g)
    exact_model = f.Model(*f.init_args()).to(device="cuda", dtype=torch.float64)
    exact_model.load_state_dict(ref.state_dict())
    x64 = x.double().requires_grad_(True)
    exact_model(x64).backward(g.double())
    named = [("x", xn.grad, xe.grad, x64.grad)]
    named += [(n, p.grad, q.grad, r.grad) for (n, p), q, r in
              zip(new.named_parameters(), ref.parameters(), exact_model.parameters())]
    for n, kgen, eager_grad, exact in named:
        err, eager_err = ((t.double() - exact).abs().max().item() for t in (kgen, eager_grad))
        allowed = HALF_ERROR_FACTOR * eager_err + torch.finfo(dt).eps * exact.abs().max().item()
        assert err <= allowed, f"{n}: {err:.3e} from fp64, eager's {eager_err:.3e}"
