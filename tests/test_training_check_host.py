"""The training check (kgen.check.validate.check_training) without a GPU: ModelNew stands in as
the reference's own class, plain torch, with faults planted in Python, and the check runs on the
CPU (its CUDA RNG and memory calls pointed at the CPU's). The kernels' own training is the GPU
tier's (tests/test_faults.py); these pin what the check itself must see: a fault in the forward
or the backward, a weight cached across steps, a file writing into its own parameters, and a
second eager run that computes the reference's function even where the first GEMM's weight is
read again."""
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from conftest import module_source
from kgen.check import validate
from kgen.frontend.reference import Reference

TIED = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super(Model, self).__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.g2 = nn.Linear(out_features, out_features)
        self.g2.weight = self.gemm.weight

    def forward(self, x):
        return self.g2(torch.sigmoid(self.gemm(x)))


def get_inputs():
    return [torch.rand(8, 16)]


def get_init_inputs():
    return [16, 16]
'''


@pytest.fixture(autouse=True)
def on_the_cpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_rng_state", lambda device=None: torch.get_rng_state())
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda state, device=None: torch.set_rng_state(state))
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (1 << 40, 1 << 40))


class _ScaledGradient(torch.autograd.Function):
    """The identity whose backward scales the gradient: a backward kernel's fault."""

    @staticmethod
    def forward(ctx, w):
        return w.clone()

    @staticmethod
    def backward(ctx, g):
        return g * 1.001


def forward_fault(Model):
    class ModelNew(Model):
        def forward(self, x):
            return super().forward(x) * 1.001
    return ModelNew


def backward_fault(Model):
    class ModelNew(Model):
        def forward(self, x):
            w = _ScaledGradient.apply(self.gemm.weight)
            return torch.sigmoid(torch.nn.functional.linear(x, w, self.gemm.bias)) * 2.0
    return ModelNew


def stale_weight(Model):
    class ModelNew(Model):   # a weight derived once and kept: the optimizer's writes unseen
        def forward(self, x):
            if not hasattr(self, "_w"):
                self._w = self.gemm.weight.detach().clone()
            w = self._w + (self.gemm.weight - self.gemm.weight.detach())
            return torch.sigmoid(torch.nn.functional.linear(x, w, self.gemm.bias)) * 2.0
    return ModelNew


def writes_its_weight(Model):
    class ModelNew(Model):   # leaves its weight rounded to bf16 after using it
        def forward(self, x):
            y = super().forward(x)
            with torch.no_grad():
                self.gemm.weight.copy_(self.gemm.weight.to(torch.bfloat16).float())
            return y
    return ModelNew


def writes_its_bias(Model):
    class ModelNew(Model):
        def forward(self, x):
            y = super().forward(x)
            with torch.no_grad():
                self.gemm.bias.mul_(1.01)
            return y
    return ModelNew


def emitted(tmp_path, source: str, new=None) -> SimpleNamespace:
    """What check_training reads of an emitted file, ModelNew the reference's class (or `new` of
    it): the reference, the models, their arguments and that the file has a backward."""
    path = tmp_path / "reference.py"
    path.write_text(source)
    ref = Reference(path)
    return SimpleNamespace(reference=ref, Model=ref.Model, ModelNew=(new or (lambda m: m))(ref.Model),
                           init_args=ref.init_args, runs_in_training=True, spec=SimpleNamespace(math="", family="", batch=8),
                           module=SimpleNamespace(_KGEN_BACKWARD_OPS=[object()]))


def train(f):
    return validate.check_training(f, torch.device("cpu"), 1e-4, 8)


POINTWISE = module_source("x = torch.sigmoid(x) * 2.0", {}, out_features=32)


FAMILY = {
    "pointwise": ("x = torch.sigmoid(x) * 2.0", {}),
    "batchnorm_softmax": ("x = self.bn(x)\nx = torch.softmax(x, dim=1)", {"bn": "nn.BatchNorm1d(out_features)"}),
    "groupnorm_relu": ("x = self.gn(x)\nx = torch.relu(x)", {"gn": "nn.GroupNorm(4, out_features)"}),
    "dropout_logsumexp": ("x = self.drop(x)\nx = torch.logsumexp(x, dim=1)", {"drop": "nn.Dropout(0.2)"}),
}


@pytest.mark.parametrize("family", sorted(FAMILY))
def test_the_references_own_class_passes(tmp_path, family):
    """BatchNorm's running statistics (buffers reset and moved each step), GroupNorm, a kink, and
    a Dropout drawing one mask for every run."""
    body, params = FAMILY[family]
    r = train(emitted(tmp_path, module_source(body, params, out_features=32)))
    assert r.passed, r.line()
    assert r.error_ratio <= 2, r.line()


def test_a_running_statistic_off_by_its_momentum_fails_it(tmp_path):
    def momentum(Model):
        class ModelNew(Model):
            def __init__(self, *args):
                super().__init__(*args)
                self.bn.momentum = 0.101
        return ModelNew

    body, params = FAMILY["batchnorm_softmax"]
    r = train(emitted(tmp_path, module_source(body, params, out_features=32), momentum))
    assert not r.passed, r.line()
    assert "running_" in r.detail, r.detail


@pytest.mark.parametrize("fault", [forward_fault, backward_fault, stale_weight, writes_its_weight, writes_its_bias],
                         ids=lambda fault: fault.__name__)
def test_a_fault_fails_it(tmp_path, fault):
    r = train(emitted(tmp_path, POINTWISE, fault))
    assert not r.passed, f"{fault.__name__} passed: {r.line()}"
    assert r.detail and "\n" not in r.detail and "cannot judge" not in r.detail, r.detail


@pytest.mark.parametrize("source", [TIED, TIED.replace("self.g2(torch.sigmoid(self.gemm(x)))",
                                                      "self.gemm(torch.sigmoid(self.gemm(x)))")],
                         ids=["tied", "applied_twice"])
def test_a_weight_read_by_two_gemms_keeps_the_second_eager_run_on_the_references_function(tmp_path, source):
    """The first GEMM's weight tied to the second's, or the Linear applied twice: permuted for the
    second eager run it would change both GEMMs, and that run's distance from fp64 (~0.15) would be
    the yardstick that a 0.1 % forward fault hides under."""
    assert train(emitted(tmp_path, source)).passed
    r = train(emitted(tmp_path, source, forward_fault))
    assert not r.passed, r.line()


def test_a_weight_read_twice_before_a_softmax_is_seen_too(tmp_path):
    """The same, the output a softmax over the features (every element below 1e-3 absolute: the
    second eager run's function is judged at the output's own scale)."""
    source = TIED.replace("self.g2(torch.sigmoid(self.gemm(x)))",
                          "torch.softmax(self.gemm(torch.sigmoid(self.gemm(x))), dim=1) * 1e-3")
    assert train(emitted(tmp_path, source)).passed
    assert not train(emitted(tmp_path, source, forward_fault)).passed
