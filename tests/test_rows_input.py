"""A module whose input is (..., features), a Linear over its last dimension (a sequence's tokens,
heads, ...), or whose trailing dimensions it flattens into its first Linear's features (a CNN
head's x.view(x.size(0), -1)): kgen takes it as the same module on the input's rows,
x.reshape(-1, features), where
running the module both ways shows that it is (trace._check_rows), and refuses it, saying why,
where it is not (an op over another dimension, a BatchNorm1d of the channels at dim 1). CPU: the
trace, the IR against the module, the emitted forward's shapes against a stand-in library; the
GPU side is tests/test_rows_input_gpu.py."""

import copy

import pytest
import torch
from click.testing import CliRunner

from kgen.cli import main
from kgen.frontend.reference import Reference
from kgen.frontend.trace import rows_output, trace
from kgen.ir.graph import Unsupported

from conftest import launch_on_cpu

IN, OUT = 24, 40

# (the module's extra __init__ lines, its forward after the Linear, get_inputs' leading sizes)
ACCEPTED = {
    "gelu": ("", "x = torch.nn.functional.gelu(x)", "batch_size, 5"),
    "softmax_last": ("", "x = torch.softmax(x, dim=-1)", "batch_size, 5"),
    "layernorm": (f"self.norm = nn.LayerNorm({OUT})", "x = torch.relu(self.norm(x))", "batch_size, 5"),
    "row_sum": ("", "x = x.sum(dim=-1, keepdim=True)", "batch_size, 5"),
    "row_max": ("", "x = torch.amax(x, -1)", "batch_size, 5"),
    "mean_of_all": ("", "x = torch.sigmoid(x).mean()", "batch_size, 5"),
    "dropout": ("self.drop = nn.Dropout(0.25)", "x = self.drop(x) + 1.0", "batch_size, 5"),
    "four_d": ("", "x = torch.nn.functional.silu(x) * 0.5", "batch_size, 3, 2"),
    # (dim=2 of a 3-D input, its last: traced with the input's leading sizes, session 61)
    "softmax_dim2": ("", "x = x.softmax(2) * 2.0", "batch_size, 5"),
}
REFUSED = {
    "softmax_dim1": ("", "x = torch.softmax(x, dim=1)", "batch_size, 5", "its values differ"),
    "sum_dim1": ("", "x = x.sum(dim=1)", "batch_size, 5", "its output is"),
    "batchnorm": (f"self.bn = nn.BatchNorm1d({OUT})", "x = self.bn(x)", "batch_size, 5", "fails one of the two ways (on the input"),
    # A gate initialized to 0 (ReZero) hides an op over the sequence at the built weights.
    "zero_gate": ("self.alpha = nn.Parameter(torch.zeros(1))", "x = x + self.alpha * x.mean(dim=1, keepdim=True)",
                  "batch_size, 5", "parameters moved at random"),
    # A bare squeeze() drops a leading size of 1, which the rows reshaped back keep.
    "bare_squeeze": ("", "x = x.amax(-1, keepdim=True).squeeze()", "batch_size, 5", "reshaped back (1, 3)"),
    # Dropout, and an op over the sequence in training mode only.
    "training_branch": ("self.drop = nn.Dropout(0.25)",
                        "x = self.drop(x)\n        if self.training:\n            x = x - x.mean(dim=1, keepdim=True)",
                        "batch_size, 5", "in training mode"),
    # A dim of a 3-D input that is not its last (session 61: dim=2 is taken, the trace with the
    # input's leading sizes mapping it to the rows' features).
    "softmax_dim1_of_a_4d_input": ("", "x = x.softmax(1) * 2.0", "batch_size, 5, 3", "its values differ"),
}


def write(tmp_path, name, init, body, lead):
    ref = tmp_path / f"{name}.py"
    ref.write_text(f"""import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        {init or "pass"}

    def forward(self, x):
        x = self.fc(x)
        {body}
        return x


batch_size = 3
in_features = {IN}
out_features = {OUT}


def get_inputs():
    return [torch.randn({lead}, in_features)]


def get_init_inputs():
    return [in_features, out_features]
""")
    return ref


@pytest.mark.parametrize("name", ACCEPTED)
def test_the_module_on_its_rows_is_traced_and_its_ir_is_the_module(tmp_path, name):
    """The trace (on the rows) and the IR run on the rows, reshaped back, give the module's own
    output on the (..., features) input, in training and eval mode."""
    ref = Reference(str(write(tmp_path, name, *ACCEPTED[name])))
    assert ref.input.shape == (torch.Size(ref.rows_of[:-1]).numel(), IN)   # the workload: the rows
    graph = trace(ref)
    torch.manual_seed(0)
    model = ref.Model(*ref.init_args()).double()
    x = torch.rand(*ref.rows_of, dtype=torch.float64) * 2 - 1
    for training in ((False,) if graph.dropouts else (True, False)):
        a, b = copy.deepcopy(model).train(training), copy.deepcopy(model).train(training)
        with torch.no_grad():
            expect = a(x)
            got = rows_output(graph.interpret(x.reshape(-1, IN), b), ref.rows_of[:-1])
        assert got.shape == expect.shape
        torch.testing.assert_close(got, expect, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", REFUSED)
def test_a_module_that_is_not_the_same_on_rows_is_refused_saying_why(tmp_path, name):
    *module, phrase = REFUSED[name]
    path = write(tmp_path, name, *module)
    with pytest.raises(Unsupported) as e:
        trace(Reference(str(path)))
    assert phrase in str(e.value)
    r = CliRunner().invoke(main, ["generate", str(path), "-o", str(tmp_path / "new.py")])
    assert r.exit_code == 2 and phrase in r.output and "Traceback" not in r.output, r.output


# A CNN head's habit: the input's trailing dimensions flattened into the Linear's features before
# it, spelled six ways (in_features = 4 x 6, the input (batch, 4, 6); (batch, 2, 2, 6) flattened
# whole).
FLATTENS = {
    "view_size0": ("", "x = x.view(x.size(0), -1)", "batch_size, 4, 6"),
    "reshape_shape0": ("", "x = x.reshape(x.shape[0], -1)", "batch_size, 4, 6"),
    "flatten_method": ("", "x = x.flatten(1)", "batch_size, 4, 6"),
    "torch_flatten": ("", "x = torch.flatten(x, start_dim=1)", "batch_size, 4, 6"),
    "nn_flatten": ("self.flat = nn.Flatten()", "x = self.flat(x)", "batch_size, 4, 6"),
    "four_d_whole": ("", "x = x.view(-1, in_features)", "batch_size, 2, 2, 6"),
    # An op between the flatten and the GEMM: a prologue on the flattened rows (since session 62).
    "op_after_flatten": ("", "x = torch.relu(x.flatten(1))", "batch_size, 4, 6"),
}
# (init, flatten, the GEMM's line, get_inputs' sizes, what the refusal says)
FLATTENED_REFUSED = {
    # The module runs on the flattened input itself: flatten(-2) of (batch, 24) is (batch * 24,).
    "flatten_minus2": ("", "x = x.flatten(-2)", "x = self.fc(x)", "batch_size, 4, 6",
                       "or flatten the input as flatten(1) or x.view(x.size(0), -1)"),
    # Rows of a partial flatten, (batch, 5, 4, 6) -> (batch, 5, 24): not taken.
    "partial": ("", "x = x.flatten(2)", "x = self.fc(x)", "batch_size, 5, 4, 6",
                "the tensor method .flatten() is not supported"),
    # The input read again unflattened after the GEMM: not the module on its flattened rows.
    "unflattened_read": ("", "y = x.flatten(1)", "x = self.fc(y) + x.amax(dim=-1).sum(dim=-1, keepdim=True)",
                         "batch_size, 4, 6", None),
}


def write_flattened(tmp_path, name, init, flatten, lead, gemm="x = self.fc(x)"):
    """write()'s module with `flatten` before its GEMM line and in_features = 4 x 6, its input
    (`lead`) flattened into them."""
    path = write(tmp_path, name, init, "", "batch_size, 4")
    text = path.read_text().replace("torch.randn(batch_size, 4, in_features)", f"torch.randn({lead})")
    text = text.replace("in_features = 24", "in_features = 4 * 6").replace(
        "        x = self.fc(x)\n", f"        {flatten}\n        {gemm}\n")
    path.write_text(text)
    return path


@pytest.mark.parametrize("name", FLATTENS)
def test_an_input_flattened_into_the_features_before_the_gemm_is_its_rows_of_them(tmp_path, name):
    """The first GEMM reads the input's trailing dimensions flattened (Reference.feature_dims, seen
    by running the forward on the meta device up to it): the workload is the rows of those
    features, and the IR run on them, reshaped back, is the module on the input as it is."""
    path = write_flattened(tmp_path, name, *FLATTENS[name])
    ref = Reference(str(path))
    assert ref.feature_dims == len(ref.rows_of) - 1 and ref.input.shape == (3, IN)
    graph = trace(ref)
    torch.manual_seed(0)
    model = ref.Model(*ref.init_args()).double()
    x = torch.rand(*ref.rows_of, dtype=torch.float64) * 2 - 1
    with torch.no_grad():
        expect = model(x)
        got = rows_output(graph.interpret(x.reshape(-1, IN), copy.deepcopy(model)), ref.rows_of[:1])
    assert got.shape == expect.shape
    torch.testing.assert_close(got, expect, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", FLATTENED_REFUSED)
def test_a_flattened_input_read_otherwise_is_refused_saying_why(tmp_path, name):
    init, flatten, gemm, lead, phrase = FLATTENED_REFUSED[name]
    path = write_flattened(tmp_path, name, init, flatten, lead, gemm)
    r = CliRunner().invoke(main, ["generate", str(path), "-o", str(tmp_path / "new.py")])
    assert r.exit_code == 2 and (phrase is None or phrase in r.output) and "Traceback" not in r.output, r.output


def test_a_flattened_input_before_a_sequential_with_batchnorm(tmp_path):
    """nn.Sequential(nn.Flatten(), Linear, ReLU, Linear, BatchNorm1d) and a softmax: two GEMM parts,
    a training BatchNorm (which no batch of 1 can take: the check runs batches of 2 and 3 here),
    the IR on the flattened rows the module's output, in training and eval mode."""
    path = tmp_path / "flat_seq.py"
    path.write_text("""import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(3 * 4 * 2, 40), nn.ReLU(), nn.Linear(40, 16),
                                 nn.BatchNorm1d(16))

    def forward(self, x):
        return torch.softmax(self.net(x), dim=1)


def get_inputs():
    return [torch.randn(8, 3, 4, 2)]


def get_init_inputs():
    return []
""")
    ref = Reference(str(path))
    assert ref.feature_dims == 3 and ref.input.shape == (8, 24)
    graph = trace(ref)
    assert len(graph.parts) == 2
    torch.manual_seed(0)
    model = ref.Model(*ref.init_args()).double()
    x = torch.rand(*ref.rows_of, dtype=torch.float64) * 2 - 1
    for training in (True, False):
        a, b = copy.deepcopy(model).train(training), copy.deepcopy(model).train(training)
        with torch.no_grad():
            expect = a(x)
            got = graph.interpret(x.reshape(8, -1), b)
        torch.testing.assert_close(got, expect, rtol=1e-10, atol=1e-12)


def test_an_input_with_no_features_is_refused_not_divided_by(tmp_path):
    """(batch, 0, 6) flattened into a Linear of 0 in-features: no flatten to take (the probe
    sees 0 features), refused as before the flatten was taken, without a traceback."""
    path = write_flattened(tmp_path, "no_features", "", "x = x.flatten(1)", "batch_size, 0, 6")
    path.write_text(path.read_text().replace("in_features = 4 * 6", "in_features = 0"))
    r = CliRunner().invoke(main, ["generate", str(path), "-o", str(tmp_path / "new.py")])
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output


@pytest.mark.parametrize("name", ["view_size0", "nn_flatten", "four_d_whole"])
def test_the_emitted_forward_flattens_the_features_and_gives_the_modules_shape(tmp_path, monkeypatch, name):
    """ModelNew on the input as get_inputs() gives it: the kernels get the rows of its flattened
    features (K = 4 x 6), the output has the module's shape, and the forward's values are the
    stand-in kernels' on those rows; a (rows, features) input goes to the kernels as it is."""
    from kgen.check.loading import EmittedFile

    path = write_flattened(tmp_path, name, *FLATTENS[name])
    out = tmp_path / "new.py"
    r = CliRunner().invoke(main, ["generate", str(path), "-o", str(out)])
    assert r.exit_code == 0, r.output
    f = EmittedFile(out)
    m = f.module
    library = launch_on_cpu(m, monkeypatch)
    monkeypatch.setattr(m, "_kgen_checked_input", lambda x, weight: x)   # (its CUDA check)
    new, ref = f.ModelNew(*f.init_args()), f.Model(*f.init_args())
    x = torch.randn(*f.reference.rows_of)
    with torch.no_grad():
        got, expect = new(x), ref(x)
        flat = new(x.reshape(-1, IN))
        # inputs of another rank, as the module flattens them too: (3, 2, 12), (3, 24, 1, 1)
        others = [(new(y), ref(y)) for y in (torch.randn(3, 2, 12), torch.randn(3, IN, 1, 1))]
    assert got.shape == expect.shape == flat.shape == (3, OUT)
    assert all(a.shape == b.shape == (3, OUT) for a, b in others)
    assert [(c["M"], c["N"], c["K"]) for c in library.calls] == [(3, OUT, IN)] * 4


@pytest.mark.parametrize("name", ["gelu", "row_max", "mean_of_all", "four_d"])
def test_the_emitted_forward_runs_the_rows_and_gives_the_modules_shape(tmp_path, monkeypatch, name):
    """ModelNew on the (..., features) input: the kernels get its rows (M = the leading sizes'
    product, K the features), and the output has the module's shape; a (batch, features) input
    goes to the kernels as it is."""
    from kgen.check.loading import EmittedFile

    path = write(tmp_path, name, *ACCEPTED[name])
    out = tmp_path / "new.py"
    r = CliRunner().invoke(main, ["generate", str(path), "-o", str(out)])
    assert r.exit_code == 0, r.output
    f = EmittedFile(out)
    m = f.module
    library = launch_on_cpu(m, monkeypatch)
    monkeypatch.setattr(m, "_kgen_checked_input", lambda x, weight: x)   # (its CUDA check)
    torch.manual_seed(0)
    new, ref = f.ModelNew(*f.init_args()), f.Model(*f.init_args())
    x = torch.randn(*f.reference.rows_of)
    with torch.no_grad():
        got, expect = new(x), ref(x)
        flat = new(x.reshape(-1, IN))
    assert got.shape == expect.shape
    rows = torch.Size(f.reference.rows_of[:-1]).numel()
    assert [(c["M"], c["N"], c["K"]) for c in library.calls] == [(rows, OUT, IN)] * 2
    assert flat.shape == ref(x.reshape(-1, IN)).shape


def test_a_module_too_large_to_run_on_the_cpu_is_refused(tmp_path, monkeypatch):
    import kgen.frontend.trace as tr

    monkeypatch.setattr(tr, "ROWS_CHECK_MAX_ELEMENTS", 100)
    with pytest.raises(Unsupported, match="are too many for that"):
        trace(Reference(str(write(tmp_path, "big", *ACCEPTED["gelu"]))))


def test_the_batch_of_such_an_input_is_its_rows(tmp_path):
    """--batch B is B rows (of repeated get_inputs() calls), whatever constants size the leading
    dimensions; --in still maps onto the features' constant."""
    path = write(tmp_path, "gelu", *ACCEPTED["gelu"])
    ref = Reference(str(path), {"batch": 7, "in_features": 32})
    assert ref.input.shape == (7, 32) and ref.rows_of[-1] == 32
    (x,) = ref.inputs()
    assert x.shape == (7, 32)
    r = CliRunner().invoke(main, ["generate", str(path), "--batch", "1000", "-o", str(tmp_path / "n.py")])
    assert r.exit_code == 0 and "batch 1000 (the input is (..., 24)" in r.output, r.output


def test_the_check_leaves_the_random_states_as_they_were(tmp_path):
    path = write(tmp_path, "dropout", *ACCEPTED["dropout"])
    ref = Reference(str(path))
    torch.manual_seed(5)
    expect = torch.rand(3)
    torch.manual_seed(5)
    trace(ref)
    assert torch.equal(torch.rand(3), expect)


def test_a_module_that_cannot_be_copied_is_checked_all_the_same(tmp_path):
    path = write(tmp_path, "locked", "self.lock = __import__('threading').Lock()",
                 "x = torch.relu(x)", "batch_size, 5")
    trace(Reference(str(path)))


# A (batch, features) reference whose module computes on (..., features) as on its rows, as a
# Linear over the last dimension does: its file takes such an input too, as eager's module does
# (a transformer's (batch, tokens, features); session 55's usage probe found it refused), where
# running the module both ways shows it (trace.takes_rows); the others keep (batch, features).
@pytest.mark.parametrize("name", sorted({*ACCEPTED} - {"four_d"}) + sorted(REFUSED))
def test_a_batch_features_reference_takes_rows_where_its_module_does(tmp_path, monkeypatch, name):
    from kgen.check.loading import EmittedFile
    from kgen.frontend.trace import takes_rows

    init, body, *rest = ACCEPTED[name] if name in ACCEPTED else REFUSED[name]
    path = write(tmp_path, name, init, body, "batch_size")
    ref = Reference(str(path))
    assert ref.rows_of is None
    out = tmp_path / "new.py"
    r = CliRunner().invoke(main, ["generate", str(path), "-o", str(out)])
    if name in ("softmax_dim2", "training_branch"):   # (refused at (batch, features) too)
        assert r.exit_code == 2, r.output
        return
    assert r.exit_code == 0, r.output
    assert takes_rows(ref) == (name in ACCEPTED)
    f = EmittedFile(out)
    m = f.module
    launch_on_cpu(m, monkeypatch)
    monkeypatch.setattr(m, "_kgen_checked_input", lambda x, weight: x if x.dim() == 2 else
                        pytest.fail(f"the kernels got a {tuple(x.shape)} input"))
    new, eager = f.ModelNew(*f.init_args()), f.Model(*f.init_args())
    new.load_state_dict(eager.state_dict())
    x = torch.randn(2, 3, IN)
    with torch.no_grad():
        if name in ACCEPTED:
            assert new(x).shape == eager.eval()(x).shape == rows_output(new(x.reshape(-1, IN)), (2, 3)).shape
            # one sample, (IN,), as its one row (checked at rank 1 the same way)
            assert takes_rows(ref, 1)
            assert new(x[0, 0]).shape == eager(x[0, 0]).shape
    # (a file that does not take them has no rows forward: its one forward checks for (batch, K))
    assert hasattr(new, "_kgen_forward_rows") == (name in ACCEPTED)
