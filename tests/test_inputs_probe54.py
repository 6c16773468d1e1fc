"""What session 54's probe of the conventions around the module found (CPU), generated as spellings:

- a forward set on the instance in __init__ (`self.forward = self._fwd`, or a lambda): what calling
  the module runs, but fx traced the class's forward, so kgen took the class's ops where the class
  had one (a wrong result: its IR computed relu where the module computed tanh, and ModelNew's own
  forward was shadowed by the instance's), and refused with fx's "missing the required forward"
  where it had none. Now refused, saying so.
- `Model` not an nn.Module class (a function returning a module, `def Model(i, o): return
  nn.Sequential(...)`, which KernelBench's `Model(*get_init_inputs())` takes): kgen wrote a file
  whose `class ModelNew(Model)` is a TypeError on import; a plain class was an AttributeError's
  traceback. Now refused when read.
- get_inputs() as a generator: a TypeError's traceback (len of a generator); it unpacks as a list
  does, and is now read as one. A bare tensor was refused as "returns 8 values" (its rows), a dict
  as "returns 1 values" (its key): now named as what they are.
- a file whose input has 0 rows or 0 features, or whose last GEMM has 0 output features: click's
  usage banner and "batch must be a positive integer" (the command line blamed for the file's
  size); now `kgen: FILE: reason`, exit 2.
- a global tensor of several elements read in forward was refused as "made in forward"; the
  message now names a global too.
Accepted spellings are checked against the module (fp64, training and eval, gradients against
torch.autograd) and trace to the IR of their plain form.
"""

import textwrap

import pytest
import torch
from click.testing import CliRunner

from kgen.cli import main
from kgen.frontend.reference import Reference, ReferenceError
from kgen.frontend.trace import trace
from kgen.ir.graph import Unsupported

from test_spellings_ops import canonical, check

HEAD = """
import torch
import torch.nn as nn

batch_size = {batch}
in_features = {k}
out_features = {n}
{pre}

class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
{init}
{forward}
{post}

def get_inputs():
{inputs}


def get_init_inputs():
    return [in_features, out_features]
"""
FORWARD = """    def forward(self, x):
        return torch.relu(self.fc(x)) * 2.0
"""


def source(init: str = "", forward: str = FORWARD, inputs: str = "return [torch.randn(batch_size, in_features)]",
           pre: str = "", post: str = "", batch: int = 8, k: int = 16, n: int = 24) -> str:
    return HEAD.format(init=textwrap.indent(init, " " * 8), forward=forward, inputs=textwrap.indent(inputs, " " * 4),
                       pre=pre, post=post, batch=batch, k=k, n=n)


def write(tmp_path, name: str, text: str):
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    return path


def generate(path, tmp_path):
    return CliRunner().invoke(main, ["generate", str(path), "-o", str(tmp_path / "out.py")])


# ---- a forward set on the instance ----------------------------------------------------------
INSTANCE_FORWARDS = {
    "a method, beside the class's own": ("self.forward = self._tanh_forward",
                                         FORWARD + "\n    def _tanh_forward(self, x):\n        return torch.tanh(self.fc(x))\n"),
    "a lambda, beside the class's own": ("self.forward = lambda x: torch.tanh(self.fc(x))", FORWARD),
    "a method, the class having none": ("self.forward = self._fwd",
                                        "    def _fwd(self, x):\n        return torch.relu(self.fc(x)) * 2.0\n"),
}


@pytest.mark.parametrize("name", sorted(INSTANCE_FORWARDS))
def test_a_forward_set_on_the_instance_is_refused(name, tmp_path):
    init, forward = INSTANCE_FORWARDS[name]
    path = write(tmp_path, "instance", source(init=init, forward=forward))
    with pytest.raises(Unsupported, match=r"sets self\.forward.*define forward as a method"):
        trace(Reference(path))
    result = generate(path, tmp_path)
    assert result.exit_code == 2 and "sets self.forward" in result.output and "Traceback" not in result.output


def test_a_forward_alias_in_the_class_is_taken(tmp_path):
    """`forward = _fwd` in the class body is the class's forward: taken, as its plain form."""
    ref = Reference(write(tmp_path, "alias", source(
        forward="    def _fwd(self, x):\n        return torch.relu(self.fc(x)) * 2.0\n\n    forward = _fwd\n")))
    check(ref)
    plain = Reference(write(tmp_path, "plain", source()))
    assert canonical(trace(ref).describe()) == canonical(trace(plain).describe())


# ---- Model not an nn.Module class -----------------------------------------------------------
NOT_A_MODULE_CLASS = {
    "a function returning the module": ("class Net(nn.Module):", "def Model(in_features, out_features):\n"
                                        "    return Net(in_features, out_features)\n", "a function"),
    "a function returning a Sequential": ("class Net(nn.Module):", "def Model(in_features, out_features):\n"
                                          "    return nn.Sequential(nn.Linear(in_features, out_features), nn.ReLU())\n",
                                          "a function"),
    "a plain class": ("class Model(nn.Module):", None, "the class Model, which is no torch.nn.Module"),
}


@pytest.mark.parametrize("name", sorted(NOT_A_MODULE_CLASS))
def test_a_model_that_is_no_module_class_is_refused(name, tmp_path):
    head, post, said = NOT_A_MODULE_CLASS[name]
    text = source().replace("class Model(nn.Module):", head)
    if post is None:   # (a class that calls its Linear from __call__, no nn.Module)
        text = text.replace("class Model(nn.Module):", "class Model:").replace("        super().__init__()\n", "")
        text = text.replace("def forward(self, x):", "def __call__(self, x):")
    else:
        text += "\n" + post
    path = write(tmp_path, "model", text)
    with pytest.raises(ReferenceError, match=f"Model is {said}.*must be an nn.Module class"):
        Reference(path)
    result = generate(path, tmp_path)
    assert result.exit_code == 2 and "must be an nn.Module class" in result.output
    assert not (tmp_path / "out.py").exists()


# ---- what get_inputs() returns ----------------------------------------------------------------
@pytest.mark.parametrize("inputs", ["yield torch.randn(batch_size, in_features)",
                                    "return (torch.randn(batch_size, in_features) for _ in range(1))",
                                    "return (torch.randn(batch_size, in_features),)"])
def test_get_inputs_as_any_iterable_is_taken(inputs, tmp_path):
    ref = Reference(write(tmp_path, "iterable", source(inputs=inputs)))
    assert tuple(ref.input.shape) == (8, 16) and ref.input.device.type == "meta"
    check(ref)
    assert tuple(ref.inputs()[0].shape) == (8, 16)
    plain = Reference(write(tmp_path, "plain", source()))
    assert canonical(trace(ref).describe()) == canonical(trace(plain).describe())


@pytest.mark.parametrize("inputs, said", [
    ("return torch.randn(batch_size, in_features)", "returns a tensor, not a list"),
    ('return {"x": torch.randn(batch_size, in_features)}', "returns a dict, not a list"),
    ("return None", "returns None, not a list"),
    ("return [[1.0, 2.0]]", r"returns 1 value \(list\)"),
    ("return [torch.randn(batch_size, in_features), 2.0]", r"returns 2 values \(Tensor, float\)"),
    ("return [torch.randn(batch_size, in_features), None]", r"returns 2 values \(Tensor, None\)"),
])
def test_get_inputs_of_another_form_is_named_as_it_is(inputs, said, tmp_path):
    path = write(tmp_path, "form", source(inputs=inputs))
    with pytest.raises(ReferenceError, match=said):
        Reference(path)
    result = generate(path, tmp_path)
    assert result.exit_code == 2 and result.output.startswith("kgen: ") and "Traceback" not in result.output


# ---- a size of 0 in the file ----------------------------------------------------------------
@pytest.mark.parametrize("sizes, inputs, said", [
    ({"batch": 0}, "return [torch.randn(batch_size, in_features)]", r"shape \(0, 16\): 0 rows"),
    ({"k": 0}, "return [torch.randn(batch_size, in_features)]", r"shape \(8, 0\): 0 features"),
    ({"n": 0}, "return [torch.randn(batch_size, in_features)]", "the last GEMM has 0 output features"),
    ({}, "return [torch.randn(batch_size, 0, in_features)]", r"shape \(8, 0, 16\): 0 rows"),
])
def test_a_size_of_0_in_the_file_is_the_files_refusal(sizes, inputs, said, tmp_path):
    path = write(tmp_path, "empty", source(inputs=inputs, **sizes))
    result = generate(path, tmp_path)
    assert result.exit_code == 2, result.output
    assert "Usage:" not in result.output and f"kgen: {path}: " in result.output
    assert said in result.output.replace("\n", " ") or __import__("re").search(said, result.output)


# ---- a global tensor read in forward -----------------------------------------------------------
def test_a_global_vector_is_named_as_one(tmp_path):
    path = write(tmp_path, "global", source(pre="BIAS = torch.linspace(-1, 1, out_features)\n", forward=(
        "    def forward(self, x):\n        return torch.relu(self.fc(x) + BIAS)\n")))
    with pytest.raises(Unsupported, match=r"shape \(24,\) made in forward .* or read from a global.*register_buffer"):
        trace(Reference(path))


def test_a_model_put_in_eval_mode_in_init_is_traced_in_training_mode_too(tmp_path):
    """A Model whose __init__ ends in self.eval() / self.train(False) is traced in training mode
    as well (its Dropout in the IR, its mask drawn once the user calls .train()); before, the
    trace took the mode __init__ left, and training mode computed without the dropout."""
    from kgen.frontend.trace import trace

    for switch in ("self.eval()", "self.train(False)"):
        path = tmp_path / "eval_in_init.py"
        path.write_text(textwrap.dedent(f"""
            import torch
            import torch.nn as nn


            class Model(nn.Module):
                def __init__(self, i, o):
                    super().__init__()
                    self.fc = nn.Linear(i, o)
                    self.drop = nn.Dropout(0.5)
                    {switch}

                def forward(self, x):
                    return torch.relu(self.drop(self.fc(x)))


            def get_inputs():
                return [torch.randn(8, 16)]


            def get_init_inputs():
                return [16, 24]
        """))
        ref = Reference(path)
        graph = trace(ref)
        assert [d["path"] for d in graph.dropouts] == ["drop"], switch
        model = ref.Model(*ref.init_args())   # (in eval mode, as its __init__ leaves it)
        x = torch.rand(4, 16)
        with torch.no_grad():
            for training in (False, True):
                model.train(training)
                torch.manual_seed(7)
                expect = model(x)
                torch.manual_seed(7)
                torch.testing.assert_close(graph.interpret(x, model), expect, rtol=1e-6, atol=1e-7)


MOVES = {
    "self.cuda() in __init__": ("", "self.cuda()"),
    "self.to('cuda') in __init__": ("", "self.to('cuda')"),
    "self.to(torch.device('cuda'), torch.float32)": ("", "self.to(torch.device('cuda'), torch.float32)"),
    "torch.set_default_device('cuda') at import": ("torch.set_default_device('cuda')", ""),
}


def _moves(tmp_path, top: str, init: str):
    """A reference whose file runs `top` at import and whose __init__ ends in `init`."""
    path = tmp_path / "moves.py"
    path.write_text(textwrap.dedent(f"""
        import torch
        import torch.nn as nn

        {top}


        class Model(nn.Module):
            def __init__(self, i, o):
                super().__init__()
                self.fc = nn.Linear(i, o)
                {init}

            def forward(self, x):
                return torch.relu(self.fc(x)) * 2.0


        def get_inputs():
            return [torch.randn(8, 16)]


        def get_init_inputs():
            return [16, 24]
    """))
    return path


@pytest.mark.parametrize("name", sorted(MOVES))
def test_a_module_that_moves_itself_to_the_gpu_is_read_without_one(name, tmp_path):
    """A module moved to the GPU in __init__ stays on the meta device where kgen reads it (as
    get_inputs()' tensors do), and a default device the file sets at import is put back after
    it: on a machine without a GPU these failed with torch's "not compiled with CUDA"."""
    path = _moves(tmp_path, *MOVES[name])
    r = CliRunner().invoke(main, ["generate", str(path), "-o", str(tmp_path / "new.py")])
    assert r.exit_code == 0, r.output
    assert torch.get_default_device() == torch.device("cpu")
    assert [n.op for n in trace(Reference(path)).nodes if n.kind == "pointwise"][-3:] == ["add", "relu", "mul"]


def test_a_file_that_sets_the_default_dtype_is_refused_and_the_default_put_back(tmp_path):
    path = tmp_path / "dtype.py"
    path.write_text(textwrap.dedent("""
        import torch
        import torch.nn as nn

        torch.set_default_dtype(torch.float64)


        class Model(nn.Module):
            def __init__(self, i, o):
                super().__init__()
                self.fc = nn.Linear(i, o)

            def forward(self, x):
                return torch.relu(self.fc(x))


        def get_inputs():
            return [torch.randn(8, 16)]


        def get_init_inputs():
            return [16, 24]
    """))
    with pytest.raises(ReferenceError, match=r"sets torch's default dtype to torch.float64 when executed"):
        Reference(path)
    assert torch.get_default_dtype() == torch.float32


def test_an_emitted_file_that_sets_the_default_device_leaves_it_as_it_was(tmp_path):
    """The emitted file runs the reference's text, torch.set_default_device("cuda") included;
    kgen's checks load it (EmittedFile) and put torch's defaults back after, so that their own
    tensors are made where they say (on an H200, its gate's CPU-input check got a CUDA tensor)."""
    from kgen.check.loading import EmittedFile

    path = _moves(tmp_path, *MOVES["torch.set_default_device('cuda') at import"])
    r = CliRunner().invoke(main, ["generate", str(path), "-o", str(tmp_path / "new.py")])
    assert r.exit_code == 0, r.output
    EmittedFile(tmp_path / "new.py", with_reference=False)
    assert torch.get_default_device() == torch.device("cpu")


def test_reading_a_reference_leaves_no_function_mode_on(tmp_path):
    """Putting torch's default device back must not leave a TorchFunctionMode behind
    (torch.set_default_device(cpu) enters one for good): with one on, every emitted file's
    forward took its custom op, as it does under a mode that records the call."""
    plain = _moves(tmp_path, "", "")
    Reference(plain)
    assert not torch._C._is_torch_function_mode_enabled()
    Reference(_moves(tmp_path, *MOVES["torch.set_default_device('cuda') at import"]))
    assert not torch._C._is_torch_function_mode_enabled()
    assert torch.get_default_device() == torch.device("cpu")


@pytest.mark.parametrize("signature", ["x, *args", "x, *args, **kwargs", "x, *rest, scale=2.0"])
def test_positional_arguments_after_the_input_are_empty(signature, tmp_path):
    """forward(self, x, *args, **kwargs) was refused as "Model.forward takes 2 inputs", where
    forward(self, *args) and forward(self, x, **kwargs) were taken: the module is called with its
    input alone, so *args after it is empty; reading it is refused."""
    from test_spellings_ops import check

    body = "torch.relu(self.fc(x)) * 2.0"
    path = tmp_path / "extra.py"
    for read, taken in ((body, True), (f"torch.relu(self.fc(x)) * {signature.split(', ')[1].lstrip('*')}[0]", False)):
        path.write_text(textwrap.dedent(f"""
            import torch
            import torch.nn as nn


            class Model(nn.Module):
                def __init__(self, i, o):
                    super().__init__()
                    self.fc = nn.Linear(i, o)

                def forward(self, {signature}):
                    return {read}


            def get_inputs():
                return [torch.randn(8, 16)]


            def get_init_inputs():
                return [16, 24]
        """))
        if taken:
            check(Reference(path))
        else:
            with pytest.raises(Unsupported, match=r"reads its \*\w+\[0\] after the input"):
                trace(Reference(path))
