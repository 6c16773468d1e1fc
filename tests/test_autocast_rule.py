"""kgen's reading of the dtype eager gives a module's output inside CUDA's torch.autocast
(kgen.frontend.autocast), on spellings of one module that torch treats differently there (CPU:
the expectations are torch's documented rules, its autocast op reference and type promotion;
tests/test_autocast_dtype_gpu.py runs eager itself on a GPU against many more modules)."""

import pytest

from kgen.frontend.autocast import output_is_fp32
from kgen.frontend.trace import trace

from test_chain import chain_module

LINEAR = ["self.fc = nn.Linear(in_features, out_features)"]
RAW = ["self.weight = nn.Parameter(torch.randn(out_features, in_features))",
       "self.bias = nn.Parameter(torch.randn(out_features))"]
# (__init__ lines, forward lines, the output's kind)
CASES = {
    # the Linear's own bias is added within the 16-bit op; `+ b` after a product is an fp32 add
    "nn.Linear": (LINEAR, ["x = torch.relu(self.fc(x))"], ()),
    "F.linear with its bias": (RAW, ["x = F.linear(x, self.weight, self.bias).relu()"], ()),
    "addmm": (RAW, ["x = torch.addmm(self.bias, x, self.weight.t())"], ()),
    "x @ W.t() + b": (RAW, ["x = x @ self.weight.t() + self.bias"], ("param",)),
    # an in-place add keeps x's dtype
    "torch.mm, then x += b": (RAW, ["x = torch.mm(x, self.weight.t())", "x += self.bias"], ()),
    "x.add_(b)": (RAW, ["x = torch.mm(x, self.weight.t())", "x.add_(self.bias)"], ()),
    # numbers, 0-d parameters and comparisons have no say; a parameter of dimensions has
    "times a number": (LINEAR, ["x = self.fc(x) * 0.5"], ()),
    "times a 0-d parameter": (LINEAR + ["self.s = nn.Parameter(torch.tensor(2.0))"], ["x = self.fc(x) * self.s"],
                              ()),
    "times a (1,) parameter": (LINEAR + ["self.s = nn.Parameter(torch.ones(1))"], ["x = self.fc(x) * self.s"],
                               ("param",)),
    "times a per-feature parameter": (LINEAR + ["self.s = nn.Parameter(torch.ones(out_features))"],
                                      ["x = self.fc(x) * self.s"], ("param",)),
    "softmax, then times a parameter": (LINEAR + ["self.s = nn.Parameter(torch.ones(out_features))"],
                                        ["x = torch.softmax(self.fc(x), dim=1) * self.s"], ("fp32", "param")),
    "a parameter and the input": (["self.fc = nn.Linear(in_features, in_features)",
                                   "self.s = nn.Parameter(torch.ones(in_features))"],
                                  ["x = self.fc(x) * self.s + x"], ("input", "param")),
    "a where of a comparison": (LINEAR, ["x = self.fc(x)", "x = torch.where(x > 0, x, x * 0.1)"], ()),
    # autocast's fp32 ops, and torch's functions of them; single 16-bit ops that kgen decomposes
    "softmax": (LINEAR, ["x = torch.softmax(self.fc(x), dim=1)"], ("fp32",)),
    "nn.Softmax": (LINEAR + ["self.sm = nn.Softmax(dim=1)"], ["x = self.sm(self.fc(x))"], ("fp32",)),
    "exp": (LINEAR, ["x = self.fc(x).exp()"], ("fp32",)),
    "a row sum": (LINEAR, ["x = self.fc(x).sum(dim=1, keepdim=True)"], ("fp32",)),
    "a row mean": (LINEAR, ["x = self.fc(x).mean(dim=1, keepdim=True)"], ()),
    "logsumexp": (LINEAR, ["x = torch.logsumexp(self.fc(x), dim=1, keepdim=True)"], ("fp32",)),
    "logsigmoid": (LINEAR, ["x = F.logsigmoid(self.fc(x))"], ()),
    "std": (LINEAR, ["x = self.fc(x)", "x = x / x.std(dim=1, keepdim=True)"], ()),
    "GroupNorm": (LINEAR + ["self.gn = nn.GroupNorm(4, out_features)"], ["x = self.gn(self.fc(x))"], ("fp32",)),
    "BatchNorm": (LINEAR + ["self.bn = nn.BatchNorm1d(out_features)"], ["x = self.bn(self.fc(x))"], ()),
    "dropout": (LINEAR + ["self.drop = nn.Dropout(0.1)"], ["x = self.drop(self.fc(x))"], ()),
    # the module's input, read again: fp32 where it is given in fp32
    "a residual of the input": (["self.fc = nn.Linear(in_features, in_features)"], ["x = self.fc(x) + x"], ("input",)),
    # a second Linear after an fp32 op: its output is 16-bit again
    "softmax, then a Linear": (LINEAR + ["self.fc2 = nn.Linear(out_features, out_features)"],
                               ["x = torch.softmax(self.fc(x), dim=1)", "x = self.fc2(x)"], ()),
}


@pytest.mark.parametrize("case", CASES)
def test_the_output_kind(case, tmp_path):
    init, body, kind = CASES[case]
    graph = trace(chain_module(tmp_path, init, body))
    assert graph.autocast_output == kind


@pytest.mark.parametrize("module_fp32", [True, False])
@pytest.mark.parametrize("input_fp32", [True, False])
@pytest.mark.parametrize("why", [(), ("fp32",), ("param",), ("input",), ("input", "param")])
def test_the_emitted_file_reads_the_reasons_as_kgen_does(why, input_fp32, module_fp32, tmp_path, monkeypatch):
    """_kgen_autocast_output, the emitted file's reading of the reasons, is output_is_fp32's
    (inside autocast, a 16-bit output; outside it, every output as it is)."""
    import torch
    from kgen.codegen import generator
    from kgen.tune.spec import Spec, Tile

    init, body, _ = CASES["nn.Linear"]
    spec = Spec.of(str(chain_module(tmp_path, init, body).path), 8, 16, 16, math="tf32x3", backend="wgmma",
                   fusion=1, tile=Tile(128, 128, 32, 16, 128, stages=4))
    namespace: dict = {}
    exec(compile(generator.render(spec), "new.py", "exec"), namespace)
    handed = namespace["_kgen_autocast_output"]
    weight = torch.zeros(2, 2, dtype=torch.float32 if module_fp32 else torch.bfloat16)
    given = torch.float32 if input_fp32 else torch.bfloat16
    monkeypatch.setattr(torch, "is_autocast_enabled", lambda device: device == "cuda")
    monkeypatch.setattr(torch, "get_autocast_dtype", lambda device: torch.bfloat16)
    # the kernels' output: 16-bit, or fp32 (the build for autocast's where some reason may hold,
    # or an fp32-only file's)
    for written in (torch.bfloat16, torch.float32):
        out = torch.zeros(2, 2, dtype=written)
        got = handed(out, weight, given, why).dtype
        assert got == (torch.float32 if output_is_fp32(why, input_fp32, module_fp32) else torch.bfloat16), written
    monkeypatch.setattr(torch, "is_autocast_enabled", lambda device: False)
    assert handed(out, weight, given, why) is out


def test_the_emitted_forward_hands_its_output_over_in_that_kind(tmp_path):
    """The file's forward ends in _kgen_autocast_output with kgen's reading (a file of fp32 modules
    only has no such line: it computes in fp32 there)."""
    from kgen.codegen import generator
    from kgen.tune.spec import Spec, Tile

    for case, expect in (("x @ W.t() + b", "('param',)"), ("nn.Linear", "()"),
                         ("a residual of the input", "('input',)")):
        init, body, _ = CASES[case]
        ref = chain_module(tmp_path, init, body, name=case.replace(" ", "_").replace("@", "at").replace(".", "_")
                           .replace("+", "plus").replace(",", ""))
        spec = Spec.of(str(ref.path), 8, 16, 16, math="tf32x3", backend="wgmma", fusion=1,
                       tile=Tile(128, 128, 32, 16, 128, stages=4))
        text = generator.render(spec)
        assert f"return _kgen_autocast_output(x, weight0, input_dtype, {expect})" in text, case
    spec = Spec.of(str(ref.path), 8, 16, 16, math="tf32", backend="cublas", fusion=1)
    assert "_kgen_autocast_output(" not in generator.render(spec).split("class ModelNew")[1]


def test_sizes_have_no_say():
    """GPT-2's Conv1D views its output to `x.size()[:-1] + (nf,)`: the sizes read from an fp32
    input do not make the output fp32 (the view is of the 16-bit addmm)."""
    import tempfile
    from pathlib import Path

    init = ["self.weight = nn.Parameter(torch.randn(in_features, out_features))",
            "self.bias = nn.Parameter(torch.randn(out_features))"]
    body = ["size_out = x.size()[:-1] + (self.bias.shape[0],)",
            "x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)", "x = x.view(size_out)"]
    with tempfile.TemporaryDirectory() as d:
        assert trace(chain_module(Path(d), init, body)).autocast_output == ()
