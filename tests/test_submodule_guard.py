"""ModelNew computes what the reference's submodules compute and calls none of them, so what a
user does to a submodule after construction that only its call would apply was passed over in
silence (session 54's probe, on an H200: a forward hook doubling a Linear's output, 1.11 off the
reference; torch.nn.utils.weight_norm's pre-hook after a weight_g update, 2.24; a ReLU swapped for
a GELU in an nn.Sequential, 0.17). The emitted forward now checks, before anything else, that
every submodule the reference's forward calls is there, of its traced class (a
torch.nn.utils.parametrize class counts as its original: parametrizations are read with the
weight) and without hooks, and that no global forward hook is registered; else it raises, naming
the submodule. CPU: the check comes before the device check, so a forward on a CPU tensor raises
the check's message where something changed, and the device's otherwise.
"""

import copy
import textwrap

import pytest
import torch
import torch.nn as nn
from torch.nn.utils import parametrizations, prune

from kgen.codegen import generator
from kgen.tune.spec import Spec, Tile

from test_render import exec_file

SEQUENTIAL = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, d_in, d_hidden, d_out):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_in, d_hidden), nn.ReLU(), nn.Linear(d_hidden, d_out))

    def forward(self, x):
        return self.net(x)


def get_inputs():
    return [torch.randn(8, 16)]


def get_init_inputs():
    return [16, 32, 8]
"""

OWN_BLOCK = """
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.fc = nn.Linear(d_in, d_out)

    def forward(self, x):
        return torch.tanh(self.fc(x)) * 2.0


class Model(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.block = Block(d_in, d_out)

    def forward(self, x):
        return self.block(x) + 1.0


def get_inputs():
    return [torch.randn(8, 16)]


def get_init_inputs():
    return [16, 8]
"""


def _module(tmp_path, source, name):
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(source))
    spec = Spec.of(str(path), 8, 16, 8, math="tf32x3", backend="wgmma", fusion=1,
                   tile=Tile(128, 128, 32, 16, 128, stages=4))
    return exec_file(generator.render(spec), name=f"guard_{name}")


@pytest.fixture(scope="module")
def sequential(tmp_path_factory):
    return _module(tmp_path_factory.mktemp("guard"), SEQUENTIAL, "sequential")


@pytest.fixture(scope="module")
def own_block(tmp_path_factory):
    return _module(tmp_path_factory.mktemp("guard"), OWN_BLOCK, "own_block")


def _forward_says(module, model) -> str:
    """The message of a CPU forward: the check's where something changed, the device's else."""
    with pytest.raises((RuntimeError, ValueError)) as e:
        model(torch.randn(8, 16))
    return str(e.value)


CPU = "ModelNew runs on CUDA tensors"


def test_the_traced_submodules_are_recorded_with_their_classes(sequential, own_block):
    assert [(path, cls) for path, cls in sequential._KGEN_CALLED_MODULES] == [
        (("net",), nn.Sequential), (("net", "0"), nn.Linear), (("net", "1"), nn.ReLU), (("net", "2"), nn.Linear)]
    # a class the reference defines is its private copy's, which ModelNew's modules are made of
    block = own_block.ModelNew(16, 8)
    assert own_block._KGEN_CALLED_MODULES[0] == (("block",), type(block.block))
    assert type(block.block) is own_block._kgen_reference.Block
    assert CPU in _forward_says(own_block, block)


# (what the user does to a fresh model, what the forward says: a part of the check's message, or CPU)
CHANGES = {
    "forward hook": (lambda m: m.net[0].register_forward_hook(lambda mod, i, o: o * 2), "'net.0' has a forward"),
    "forward pre-hook": (lambda m: m.net[2].register_forward_pre_hook(lambda mod, a: (a[0] * 0.5,)),
                         "'net.2' has a forward"),
    "backward hook": (lambda m: m.net[0].register_full_backward_hook(lambda mod, gi, go: None), "'net.0' has a"),
    "a hook on the container": (lambda m: m.net.register_forward_hook(lambda mod, i, o: o + 1), "'net' has a"),
    "old weight_norm": (lambda m: torch.nn.utils.weight_norm(m.net[0]), "'net.0' has a forward"),
    "pruning": (lambda m: prune.l1_unstructured(m.net[2], "weight", amount=0.5), "'net.2' has a forward"),
    "a ReLU swapped for a GELU": (lambda m: m.net.__setitem__(1, nn.GELU()), "'net.1' is a GELU"),
    "a Linear deleted": (lambda m: m.net._modules.pop("2"), "'net.2' that the reference's forward calls is gone"),
    "parametrizations.weight_norm": (lambda m: parametrizations.weight_norm(m.net[0]), CPU),
    "a new Linear of the same class": (lambda m: m.net.__setitem__(0, nn.Linear(16, 32)), CPU),
    "a hook on the model itself": (lambda m: m.register_forward_hook(lambda mod, i, o: o), CPU),
    "nothing": (lambda m: None, CPU),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_change_only_a_submodule_s_call_would_apply_is_refused(sequential, change):
    do, says = CHANGES[change]
    model = sequential.ModelNew(16, 32, 8)
    do(model)
    message = _forward_says(sequential, model)
    assert says in message, message
    if says != CPU:
        assert sequential._kgen_changed_submodule(model) == message
        if change not in ("old weight_norm", "pruning"):   # (torch's deepcopy refuses their computed weights)
            assert sequential._kgen_changed_submodule(copy.deepcopy(model)) == message


def test_a_global_forward_hook_is_refused_while_registered(sequential):
    model = sequential.ModelNew(16, 32, 8)
    handle = nn.modules.module.register_module_forward_hook(lambda mod, i, o: None)
    try:
        assert "a global forward hook is registered" in _forward_says(sequential, model)
    finally:
        handle.remove()
    assert CPU in _forward_says(sequential, model)


def test_a_child_of_the_reference_s_own_class_swapped_is_refused(own_block):
    model = own_block.ModelNew(16, 8)
    model.block = nn.Linear(16, 8)
    assert "'block' is a Linear, and this ModelNew's kernels compute what the traced Block computes" in \
        _forward_says(own_block, model)
