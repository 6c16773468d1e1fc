"""GPU tier of modules with tensor inputs after the first (`forward(self, x, residual)`, BertOutput;
tests/test_second_input.py has the CPU side): kgen's full gate (validate: its checks call the models
with x alone and get the extra inputs from the reference's get_inputs(), Reference.given_extra_inputs)
in fp32 and bf16, and the emitted file against the module itself, each called with every input:
forward, training mode with a Dropout (one mask), and the gradients of x, of the extra inputs and of
the parameters against the fp64 module, eager's error beside."""

import copy

import pytest
import torch

from kgen.check.validate import validate

from conftest import gate_failures, tf32x3_wgmma_files
from test_second_input import BATCH, IN, OUT, SAME_WIDTH, module_file, tokens_file

pytestmark = pytest.mark.gpu

HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
CASES = ["bert_output", "residual_after_layernorm", "act_plus_residual", "gate_then_norm", "row_scale",
         "softmax_with_mask", "detached_residual", "addcmul", "input_and_residual",
         "detached_input_and_residual"]
ROWS = 257   # (an odd batch: the GEMM's last tile and the row kernel's last rows partly empty)
# Two inputs read after the GEMM that want gradients (d_input's two slots): the module's and an
# extra one per element before a norm, two extra ones before a norm and in the broadcast tail.
TWO_GRADIENTS = ["addcmul", "gate_then_norm", "input_and_residual"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("second_input_refs")
    return tf32x3_wgmma_files(tmp_path_factory, "second_input",
                              {name: (module_file(d, name), ROWS, OUT if name in SAME_WIDTH else IN, OUT)
                               for name in CASES})


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-4), (torch.bfloat16, 1e-2)], ids=["fp32", "bf16"])
@pytest.mark.parametrize("name", CASES)
def test_the_gate_with_a_second_input(files, name, dtype, tol):
    if not HOPPER:
        pytest.skip("the wgmma files need a Hopper (sm_90) GPU")
    failed = gate_failures(validate(files[name], tol=tol, dtype=dtype), dtype)
    assert not failed, failed


def _models(f, training: bool):
    torch.manual_seed(0)
    with torch.device("cuda"):
        ref = f.reference.Model(*f.init_args())
        new = f.module.ModelNew(*f.init_args())
    new.load_state_dict(ref.state_dict())
    ref64 = copy.deepcopy(ref).double()
    for m in (ref, new, ref64):
        m.train(training)
    return ref, new, ref64


def _run(model, inputs, g, seed):
    """model(*inputs) from one CUDA RNG state (a Dropout: one mask), its output and the gradients
    of every input and parameter for the output gradient g."""
    inputs = [t.detach().clone().requires_grad_() for t in inputs]
    torch.cuda.manual_seed(seed)
    y = model(*inputs)
    wanted = inputs + list(model.parameters())
    grads = torch.autograd.grad(y, wanted, g.to(y.dtype), allow_unused=True)
    return y.detach().double(), [None if d is None else d.double() for d in grads]


@pytest.mark.parametrize("autograd", ["node", "python"])
@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("name", CASES)
def test_the_file_against_the_module_with_every_input(files, name, training, autograd, monkeypatch):
    """ModelNew(x, residual) as the user calls it: its output and the gradients of x, of each extra
    input (none where the module reads it detached; two inputs read after the GEMM each get theirs)
    and of the parameters, against the fp64 module, within 10x eager fp32's error (and 1e-5);
    through eager training's C++ node and through the Python vjp (torch.compile's path)."""
    if not HOPPER:
        pytest.skip("the wgmma files need a Hopper (sm_90) GPU")
    if autograd == "python":
        monkeypatch.setenv("KGEN_PYTHON_AUTOGRAD", "1")
    f = files[name]
    ref, new, ref64 = _models(f, training)
    inputs = [t.cuda() for t in f.reference.inputs(ROWS)]
    assert len(inputs) >= 2
    g = torch.randn(ref(*inputs).shape, device="cuda", generator=torch.Generator("cuda").manual_seed(1))
    y64, exact = _run(ref64, [t.double() for t in inputs], g.double(), 5)
    y32, eager = _run(ref, inputs, g, 5)
    y, got = _run(new, inputs, g, 5)

    def error(a, b):
        return 0.0 if a is None and b is None else (a - b).abs().max().item()

    assert error(y, y64) <= max(10 * error(y32, y64), 1e-5), (error(y, y64), error(y32, y64))
    for k, (e, a, b) in enumerate(zip(exact, eager, got)):
        assert (b is None) == (e is None), k   # (an input read detached gets none, as in torch)
        assert error(b, e) <= max(10 * error(a, e), 1e-5), (k, error(b, e), error(a, e))
    if name in TWO_GRADIENTS:
        assert all(d is not None for d in got[:len(inputs)])


def test_the_extra_input_is_checked_on_the_gpu(files):
    if not HOPPER:
        pytest.skip("the wgmma files need a Hopper (sm_90) GPU")
    f = files["bert_output"]
    _, new, _ = _models(f, False)
    x, r = [t.cuda() for t in f.reference.inputs(ROWS)]
    with torch.no_grad():
        with pytest.raises(ValueError, match="on x's device"):
            new(x, r.cpu())
        with pytest.raises(TypeError, match="in x's dtype"):
            new(x, r.half())
        # a view that is not contiguous: as x's, the kernels get a contiguous copy
        wide = torch.randn(ROWS, 2 * OUT, device="cuda")[:, ::2]
        assert torch.allclose(new(x, wide), new(x, wide.contiguous()), rtol=0, atol=0)


@pytest.fixture(scope="module")
def tokens(tmp_path_factory):
    d = tmp_path_factory.mktemp("second_input_tokens")
    return tf32x3_wgmma_files(tmp_path_factory, "second_input_tokens", {"bert": (tokens_file(d), 3 * BATCH, IN, OUT)})


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_bert_output_on_tokens(tokens, training):
    """BertOutput as HuggingFace calls it, (batch, tokens, features) hidden states and residual:
    the file on them against the module (output and gradients, x, the residual, the parameters),
    and kgen's gate on their rows."""
    if not HOPPER:
        pytest.skip("the wgmma files need a Hopper (sm_90) GPU")
    f = tokens["bert"]
    ref, new, ref64 = _models(f, training)
    gen = torch.Generator().manual_seed(2)
    inputs = [torch.randn(BATCH, 3, IN, generator=gen).cuda(), torch.randn(BATCH, 3, OUT, generator=gen).cuda()]
    g = torch.randn(BATCH, 3, OUT, generator=gen).cuda()
    y64, exact = _run(ref64, [t.double() for t in inputs], g.double(), 5)
    y32, eager = _run(ref, inputs, g, 5)
    y, got = _run(new, inputs, g, 5)
    assert y.shape == y64.shape
    assert (y - y64).abs().max().item() <= max(10 * (y32 - y64).abs().max().item(), 1e-5)
    for k, (e, a, b) in enumerate(zip(exact, eager, got)):
        assert (b - e).abs().max().item() <= max(10 * (a - e).abs().max().item(), 1e-5), k
    if training:
        failed = gate_failures(validate(f, tol=1e-4), torch.float32)
        assert not failed, failed


def test_bench_training_reports_each_extra_input_s_gradient(files):
    """kgen bench --training's error table: dL/dx, the parameters', then each input after x by the
    reference's name, against fp64, ModelNew's within 10x eager's (and 1e-5)."""
    from kgen.check.bench import bench_training

    if not HOPPER:
        pytest.skip("the wgmma files need a Hopper (sm_90) GPU")
    result = bench_training(files["gate_then_norm"], batch=ROWS, iters=3, rounds=1)
    assert [n for n, *_ in result.errors][-2:] == ["residual", "gate"]
    for name, scale, new, eager in result.errors[-2:]:
        assert scale > 0 and new <= max(10 * eager, 1e-5), (name, scale, new, eager)


def test_the_checks_that_vary_x_vary_the_extra_inputs_alike(files, monkeypatch):
    """validate's NaN / Inf check poisons each input after x in turn (a NaN, then +inf and -inf,
    in two rows), its magnitude sweep scales them as x, and its randn / offset calls draw them as
    x: each a call with those inputs, passing against eager's pattern and the gate."""
    from kgen.check import validate as v

    if not HOPPER:
        pytest.skip("the wgmma files need a Hopper (sm_90) GPU")
    seen = []
    call = v.Trio.call

    def recording(self, x, cmp, what, nan_allowed=None, extras=None):
        seen.append((what, x, extras))
        return call(self, x, cmp, what, nan_allowed, extras)

    monkeypatch.setattr(v.Trio, "call", recording)
    f, device = files["bert_output"], torch.device("cuda")
    result = v.check_nonfinite_inputs(f, device, 1e-4, ROWS)
    assert result.passed, result.detail
    poisoned = {what: extras for what, _, extras in seen if extras is not None}
    assert set(poisoned) == {"NaN in input_tensor", "Inf in input_tensor"}
    assert int(torch.isnan(poisoned["NaN in input_tensor"][0]).sum()) == 2
    assert sorted(poisoned["Inf in input_tensor"][0][torch.isinf(poisoned["Inf in input_tensor"][0])].tolist()) \
        == [float("-inf"), float("inf")]
    seen.clear()
    result = v.check_magnitudes(f, device, 1e-4, ROWS)
    assert result.passed, result.detail
    drawn = f.reference.extra_inputs_for(seen[0][1])[0]
    for what, x, extras in seen:
        scale = float(what.split("* ")[1])
        assert torch.equal(extras[0], drawn * scale), what
    seen.clear()
    result = v._named("offset", v._train_check(f, device, 1e-4, "offset", ROWS, 2, judge_by_fp64=True))
    assert result.passed, result.detail
    assert all(extras is not None and extras[0].min() >= v.LARGE_OFFSET for _, _, extras in seen)


@pytest.mark.parametrize("script", ["compare_forward.py", "bench_training.py"])
def test_the_scripts_run_a_module_with_a_second_input(files, script):
    """scripts/compare_forward.py and scripts/bench_training.py give a module with an input after
    x every input (they called the models with x alone: a TypeError)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    if not HOPPER:
        pytest.skip("the wgmma files need a Hopper (sm_90) GPU")
    f = files["bert_output"]
    root = Path(__file__).resolve().parent.parent
    run = subprocess.run([sys.executable, str(root / "scripts" / script), str(f.reference.path), str(f.path)],
                         capture_output=True, text=True, timeout=540,
                         env={**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"})
    assert run.returncode == 0, run.stderr[-3000:]
    assert "err" in run.stdout or "error" in run.stdout, run.stdout


@pytest.fixture(scope="module")
def leads(tmp_path_factory):
    from test_second_input import leads_file

    d = tmp_path_factory.mktemp("second_input_leads")
    # (the batch get_inputs() gives: 4 x 3 rows)
    return tf32x3_wgmma_files(tmp_path_factory, "second_input_leads", {"bert": (leads_file(d), 12, IN, OUT)})


def test_bert_output_written_over_its_input_s_sizes(leads):
    """BertOutput whose forward reads `B, S, D = h.shape`, with a (batch, tokens, N) residual:
    kgen's gate (its checks call the models with rows x alone: each input as one sample of its
    rows) and the file on (batch, tokens, .) inputs, by keyword, against the module."""
    if not HOPPER:
        pytest.skip("the wgmma files need a Hopper (sm_90) GPU")
    f = leads["bert"]
    failed = gate_failures(validate(f, tol=1e-4), torch.float32)
    assert not failed, failed
    ref, new, ref64 = _models(f, True)
    gen = torch.Generator().manual_seed(2)
    x, r = torch.randn(BATCH, 3, IN, generator=gen).cuda(), torch.randn(BATCH, 3, OUT, generator=gen).cuda()
    with torch.no_grad():
        y, y32, y64 = new(hidden_states=x, input_tensor=r), ref(x, r), ref64(x.double(), r.double())
    assert y.shape == y64.shape
    assert (y.double() - y64).abs().max().item() <= max(10 * (y32.double() - y64).abs().max().item(), 1e-5)
