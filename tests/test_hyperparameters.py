"""A module's constructor arguments that the trace bakes into the kernels (a multiplier, a
negative slope, GroupNorm's groups and eps, clamp bounds): the emitted ModelNew built with other
values, or changed after, must refuse to run rather than compute with the traced ones
(trace.hyperparameters_read, generator.hyperparameter_lines). What the emitted forward reads from
the model or its tensors (feature sizes, a BatchNorm's eps and momentum, inplace flags) must stay
free. Whether a value is baked in is judged here independently of the trace's perturbations: the
IR traced at one value, run by the oracle (Graph.interpret) on the module built with another,
computes otherwise than that module exactly where a guard is needed."""

import copy
import enum
import math

import numpy as np

import pytest
import torch

from kgen.frontend.reference import Reference
from kgen.frontend.trace import (_perturbations, _plain, _scalar_attributes, _set_setting, _setting_name,
                                 _setting_owner, trace)

from test_kernelbench_corpus import FILES, needs_corpus
from test_ir import SMALL

N = 32

# A constructor style, then the module: (hyperparameter, its value, another value, __init__'s
# lines, forward's lines (x is the input), the attributes the trace must guard).
STYLES = {
    "super()": "super().__init__()",
    "super(Model, self)": "super(Model, self).__init__()",
    "nn.Module.__init__": "nn.Module.__init__(self)",
}
GUARDED = {
    "attribute * operator": ("multiplier", 2.0, 3.0, ["self.gemm = nn.Linear(in_features, out_features)",
                                                      "self.multiplier = multiplier"],
                             ["x = self.gemm(x) * self.multiplier"], {"multiplier"}),
    "attribute, in-place mul_": ("multiplier", 2.0, 0.5, ["self.gemm = nn.Linear(in_features, out_features)",
                                                          "self.multiplier = multiplier"],
                                 ["x = self.gemm(x)", "x.mul_(self.multiplier)"], {"multiplier"}),
    "torch.mul, an attribute": ("scale", 1.5, -1.5, ["self.fc = nn.Linear(in_features, out_features)",
                                                     "self.scale = scale"],
                                ["x = torch.mul(self.fc(x), self.scale)"], {"scale"}),
    "F.leaky_relu of an attribute": ("slope", 0.1, 0.2, ["self.gemm = nn.Linear(in_features, out_features)",
                                                         "self.slope = slope"],
                                     ["x = F.leaky_relu(self.gemm(x), self.slope)"], {"slope"}),
    "nn.LeakyReLU(negative_slope=)": ("slope", 0.1, 0.3, ["self.gemm = nn.Linear(in_features, out_features)",
                                                          "self.act = nn.LeakyReLU(negative_slope=slope)"],
                                      ["x = self.act(self.gemm(x))"], {"act.negative_slope"}),
    "nn.Sequential's child": ("slope", 0.1, 0.3, ["self.net = nn.Sequential(nn.Linear(in_features, out_features), "
                                                  "nn.LeakyReLU(slope))"],
                              ["x = self.net(x)"], {"net.1.negative_slope"}),
    "clamp between attributes": ("bound", 1.0, 2.0, ["self.gemm = nn.Linear(in_features, out_features)",
                                                     "self.lo, self.hi = -bound, bound"],
                                 ["x = torch.clamp(self.gemm(x), self.lo, self.hi)"], {"lo", "hi"}),
    "nn.Hardtanh's bounds": ("bound", 1.0, 0.5, ["self.gemm = nn.Linear(in_features, out_features)",
                                                 "self.act = nn.Hardtanh(min_val=-bound, max_val=bound)"],
                             ["x = self.act(self.gemm(x))"], {"act.min_val", "act.max_val"}),
    "GroupNorm's groups": ("groups", 4, 8, ["self.gemm = nn.Linear(in_features, out_features)",
                                            "self.gn = nn.GroupNorm(groups, out_features)"],
                           ["x = self.gn(self.gemm(x))"], {"gn.num_groups", "gn.eps", "gn.affine"}),
    "GroupNorm's eps": ("eps", 1e-5, 1e-1, ["self.gemm = nn.Linear(in_features, out_features)",
                                            "self.gn = nn.GroupNorm(4, out_features, eps=eps)"],
                        ["x = self.gn(self.gemm(x))"], {"gn.num_groups", "gn.eps", "gn.affine"}),
    "a numpy scalar": ("scale", 3.0, 0.5, ["self.gemm = nn.Linear(in_features, out_features)",
                                           "self.scale = np.float64(scale)"],
                       ["x = self.gemm(x) * self.scale"], {"scale"}),
    "a private attribute": ("scale", 3.0, 0.5, ["self.gemm = nn.Linear(in_features, out_features)",
                                                "self._scale = scale"],
                            ["x = self.gemm(x) * self._scale"], {"_scale"}),
    "a tuple of bounds with an infinity": ("bound", 2.0, 1.0, ["self.gemm = nn.Linear(in_features, out_features)",
                                                             "self.bounds = (-math.inf, bound)"],
                                           ["x = torch.clamp(self.gemm(x), *self.bounds)"], {"bounds"}),
    "one attribute at a long path": ("slope", 0.2, 0.3, ["self.gemm = nn.Linear(in_features, out_features)",
                                                         "self.post_processing_block_of_the_module = "
                                                         "nn.Sequential(nn.LeakyReLU(slope))"],
                                     ["x = self.post_processing_block_of_the_module(self.gemm(x))"],
                                     {"post_processing_block_of_the_module.0.negative_slope"}),
    "a child class's attribute": ("divisor", 4.0, 8.0, ["self.gemm = nn.Linear(in_features, out_features)",
                                                        "self.divisor = divisor"],
                                  ["x = self.gemm(x) / self.divisor"], {"divisor"}),
}
# Read by the emitted forward from the model (or without effect): a ModelNew built with another
# value runs it.
FREE = {
    "BatchNorm1d's eps": ("eps", 1e-5, 1e-2, ["self.gemm = nn.Linear(in_features, out_features)",
                                              "self.bn = nn.BatchNorm1d(out_features, eps=eps)"],
                          ["x = self.bn(self.gemm(x))"]),
    "BatchNorm1d's momentum": ("momentum", 0.1, 0.5, ["self.gemm = nn.Linear(in_features, out_features)",
                                                      "self.bn = nn.BatchNorm1d(out_features, momentum=momentum)"],
                               ["x = self.bn(self.gemm(x))"]),
    "LayerNorm's normalized_shape": ("eps", 1e-5, 1e-5, ["self.gemm = nn.Linear(in_features, out_features)",
                                                        "self.norm = nn.LayerNorm(out_features, eps=eps)"],
                                     ["x = self.norm(self.gemm(x))"]),
    "ReLU's inplace": ("inplace", False, True, ["self.gemm = nn.Linear(in_features, out_features)",
                                                "self.act = nn.ReLU(inplace=inplace)"],
                       ["x = self.act(self.gemm(x))"]),
}


def _source(name: str, module: tuple, style: str = "super()") -> str:
    hp, value, _, init, body = module[:5]
    child = name == "a child class's attribute"
    cls = "Base" if child else "Model"
    lines = ["import math", "", "import numpy as np", "import torch", "import torch.nn as nn",
             "import torch.nn.functional as F", "", "",
             f"class {cls}(nn.Module):",
             f"    def __init__(self, in_features, out_features, {hp}={value!r}):",
             "        " + STYLES[style].replace("Model", cls)]
    lines += [f"        {line}" for line in init]
    lines += ["", "    def forward(self, x):"] + [f"        {line}" for line in body] + ["        return x"]
    if child:
        lines += ["", "", "class Model(Base):", "    pass"]
    lines += ["", "", "batch_size = 8", "in_features = 16", f"out_features = {N}", f"{hp} = {value!r}", "", "",
              "def get_inputs():", "    return [torch.rand(batch_size, in_features)]", "", "",
              "def get_init_inputs():", f"    return [in_features, out_features, {hp}]", ""]
    return "\n".join(lines)


def _reference(tmp_path, name: str, module: tuple, style: str = "super()") -> Reference:
    path = tmp_path / "ref.py"
    path.write_text(_source(name, module, style))
    return Reference(path)


def _oracle_differs(ref: Reference, graph, init_args: list) -> bool:
    """Whether the IR `graph` (traced from `ref` as get_init_inputs() builds it), run by the
    oracle on the module built from `init_args`, computes otherwise than that module, in fp64 on
    the CPU, in training mode (a dropout's mask drawn alike from one seed)."""
    torch.manual_seed(0)
    model = ref.Model(*init_args).double()
    twin = copy.deepcopy(model)
    x = torch.rand(SMALL["batch"], graph.parts[0].in_features, dtype=torch.float64) * 4 - 2
    with torch.no_grad():
        torch.manual_seed(1)
        expect = model(x)
        torch.manual_seed(1)
        got = graph.interpret(x, twin)
    return got.shape != expect.shape or not torch.allclose(got, expect, rtol=1e-9, atol=1e-12)


def _emitted_model_new(ref: Reference, tmp_path):
    from kgen.codegen import generator
    from kgen.tune.spec import Spec, Tile
    spec = Spec.of(str(ref.path), 8, 16, N, math="tf32x3", backend="wgmma", fusion=1,
                   tile=Tile(128, 128, 32, 16, 128, stages=4))
    path = generator.write(spec, tmp_path / "new.py")
    ns = {"__name__": "hyperparameters_new"}
    exec(compile(path.read_text(), str(path), "exec"), ns)
    return ns["ModelNew"], path.read_text()


def _forward_error(model) -> str:
    """What the emitted forward raises on a CPU input: the guards come first, so without a GPU
    a refused model says why, and an accepted one gets as far as the input's device check."""
    with pytest.raises(Exception) as info:
        model(torch.rand(8, 16))
    return f"{type(info.value).__name__}: {info.value}"


@pytest.mark.parametrize("style", sorted(STYLES))
@pytest.mark.parametrize("name", sorted(GUARDED))
def test_a_baked_in_constructor_argument_is_guarded(name, style, tmp_path):
    hp, value, other, _, _, expected = GUARDED[name]
    ref = _reference(tmp_path, name, GUARDED[name], style)
    graph = trace(ref)
    assert {path for path, _ in graph.hyperparameters} == expected
    # The guard is needed: the IR traced at `value` computes otherwise than a module built with `other`.
    assert _oracle_differs(ref, graph, [16, N, other])
    assert not _oracle_differs(ref, graph, [16, N, value])
    if style != "super()":
        return   # (the emitted file is the same for every constructor style)
    ModelNew, text = _emitted_model_new(ref, tmp_path)
    assert "synthesized for" not in _forward_error(ModelNew(16, N, value))
    refused = _forward_error(ModelNew(16, N, other))
    assert refused.startswith("ValueError: this ModelNew was synthesized for"), refused
    for path, traced in graph.hyperparameters:
        assert f"{path}={traced!r}" in refused
    # Other feature sizes stay free (the file reads them from its tensors); a value changed after
    # construction is refused as one passed to it.
    assert "synthesized for" not in _forward_error(ModelNew(16, 2 * N, value))
    model = ModelNew(16, N, value)
    module, _, attribute = sorted(expected)[0].rpartition(".")
    setattr(model.get_submodule(module), attribute, other)
    assert "synthesized for" in _forward_error(model)


@pytest.mark.parametrize("name", sorted(FREE))
def test_what_the_emitted_forward_reads_from_the_model_stays_free(name, tmp_path):
    _, value, other, _, _ = FREE[name]
    ref = _reference(tmp_path, name, FREE[name])
    graph = trace(ref)
    assert [path for path, _ in graph.hyperparameters if not path.endswith(".eps")] == []
    assert not _oracle_differs(ref, graph, [16, N, other])
    ModelNew, text = _emitted_model_new(ref, tmp_path)
    assert "synthesized for" not in _forward_error(ModelNew(16, N, other))
    assert "synthesized for" not in _forward_error(ModelNew(16, 2 * N, value))   # other feature sizes


def test_perturbations_move_every_scalar_kind_and_leave_the_rest():
    assert _perturbations(True) == [False]
    assert _perturbations(4) == [5, 3]
    assert _perturbations(64, frozenset({64})) == [128, 32]   # a feature size: divisibility kept
    assert _perturbations((-math.inf, 2.0)) == [(1.0, 3.25), (-1.0, 0.75)]
    up, down = _perturbations(1e-5)
    assert up > 1e-5 > down
    assert _perturbations("none") == ["none~kgen"]
    assert _perturbations((16,)) == [(17,), (15,)]
    assert _perturbations(float("nan")) == []
    assert _perturbations(None) == [] and _perturbations([1, 2]) == []
    assert _plain(np.float32(0.5)) == 0.5 and type(_plain(np.int64(3))) is int
    assert _plain(enum.IntEnum("E", "A")(1)) is None and _plain((1, "a")) is None


@needs_corpus
@pytest.mark.parametrize("ref", FILES, ids=lambda p: p.name.split("_")[0])
def test_every_published_hyperparameter_the_ir_depends_on_is_guarded(ref):
    """KernelBench's files: each scalar attribute of the module, moved as the trace's check moves
    it, where the IR (traced unmoved) then computes otherwise than the moved module, is among the
    guarded ones; feature sizes and inplace flags never are."""
    reference = Reference(str(ref), SMALL)
    graph = trace(reference)
    guarded = {path for path, _ in graph.hyperparameters}
    assert not any(path.rpartition(".")[2] in ("in_features", "out_features", "inplace", "training")
                   for path in guarded), guarded
    widths = frozenset(w for p in graph.parts for w in (p.in_features, p.out_features))
    for path, steps, value in _scalar_attributes(reference.meta_model()):
        dotted = _setting_name(path, steps)
        for other in _perturbations(value, widths):
            torch.manual_seed(0)
            model = reference.Model(*reference.init_args()).double()
            _set_setting(_setting_owner(model.get_submodule(path), steps), steps[-1], other)
            twin = copy.deepcopy(model)
            x = torch.rand(SMALL["batch"], SMALL["in_features"], dtype=torch.float64) * 4 - 2
            try:
                with torch.no_grad():
                    torch.manual_seed(1)
                    expect = model(x)
            except Exception:  # noqa: BLE001 - the module itself refuses the value: nothing to compare
                continue
            with torch.no_grad():
                torch.manual_seed(1)
                got = graph.interpret(x, twin)
            if got.shape != expect.shape or not torch.allclose(got, expect, rtol=1e-9, atol=1e-12, equal_nan=True):
                assert dotted in guarded, (dotted, value, other)


@pytest.mark.parametrize("body, init, guarded, baked", [
    ("x = torch.sigmoid(self.gemm(x)) / self.width", "self.width = out_features", "width", f"= {float(N)!r} :"),
    ("x = self.gn(self.gemm(x))", "self.gn = nn.GroupNorm(out_features // 2, out_features)", "gn.num_groups",
     f"groups={N // 2}"),
], ids=["a width the forward divides by", "GroupNorm's groups equal to a width"])
def test_a_feature_size_the_ir_computes_with_is_guarded(body, init, guarded, baked, tmp_path):
    """An int equal to a GEMM's width (or half one) is moved to twice and half it (divisibility
    kept): where the IR then changes, the forward computes with the number, which the IR holds
    (guarded); a ModelNew built at another width is refused, at the traced one not."""
    module = ("unused", 0, 0, ["self.gemm = nn.Linear(in_features, out_features)", init], [body])
    ref = _reference(tmp_path, "width", module)
    graph = trace(ref)
    assert guarded in {path for path, _ in graph.hyperparameters}
    assert baked in graph.describe()
    ModelNew, _ = _emitted_model_new(ref, tmp_path)
    assert "synthesized for" not in _forward_error(ModelNew(16, N, 0))
    assert "synthesized for" in _forward_error(ModelNew(16, 2 * N, 0))


CONFIGURED = '''
import dataclasses

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclasses.dataclass(frozen=True)
class Config:
    scale: float = 2.0
    slope: float = 0.1


class Settings:
    def __init__(self, shift):
        self.shift = shift


class Model(nn.Module):
    def __init__(self, in_features, out_features, config, options, weights, settings):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.config = config
        self.options = options
        self.weights = weights
        self.settings = settings

    def forward(self, x):
        y = self.fc(x) * self.config.scale
        y = F.leaky_relu(y, self.options["act"]["slope"]) + self.settings.shift
        return y * self.weights[1]


def get_inputs():
    return [torch.rand(8, 16)]


def get_init_inputs():
    return [16, OUT, Config(), {"act": {"slope": 0.2}, "unused": 1.5}, [0.5, 3.0], Settings(0.25)]
'''.replace("OUT", str(N))


def test_a_setting_inside_a_config_object_dict_or_list_is_guarded(tmp_path):
    """A forward that reads a setting from a config object (a frozen dataclass's field, a config
    class of the file's), a nested dict or a list bakes it into the IR as a number: the emitted
    forward refuses a model built with another, naming it, as it does a scalar attribute (it
    computed with the traced value in silence before); a setting the forward does not read stays
    free."""
    path = tmp_path / "configured.py"
    path.write_text(CONFIGURED)
    ref = Reference(path)
    graph = trace(ref)
    assert dict(graph.hyperparameters) == {"config.scale": 2.0, "options['act']['slope']": 0.2,
                                           "weights[1]": 3.0, "settings.shift": 0.25}
    ModelNew, text = _emitted_model_new(ref, tmp_path)
    ns = {}
    exec(compile(CONFIGURED, "configured", "exec"), ns)
    config, settings = ns["Config"], ns["Settings"]

    def built(**changed):
        args = dict(config=config(), options={"act": {"slope": 0.2}, "unused": 1.5}, weights=[0.5, 3.0],
                    settings=settings(0.25))
        args.update(changed)
        return ModelNew(16, N, **args)
    assert "synthesized for" not in _forward_error(built())
    assert "synthesized for" not in _forward_error(built(options={"act": {"slope": 0.2}, "unused": 9.0}))
    for changed, name in ((dict(config=config(scale=3.0)), "config.scale=2.0"),
                          (dict(options={"act": {"slope": 0.3}, "unused": 1.5}), "options['act']['slope']=0.2"),
                          (dict(weights=[0.5, 4.0]), "weights[1]=3.0"),
                          (dict(settings=settings(0.5)), "settings.shift=0.25")):
        refused = _forward_error(built(**changed))
        assert refused.startswith("ValueError: this ModelNew was synthesized for") and name in refused, refused
    # (the traced config object itself is as get_init_inputs() made it: the perturbations put back)
    assert ref.init_args()[2].scale == 2.0 and ref.init_args()[3]["act"]["slope"] == 0.2


LISTED = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features, slope):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.acts = [nn.LeakyReLU(slope)]
        self.table = {"act": nn.ELU(alpha=0.5)}

    def forward(self, x):
        y = self.fc(x)
        for act in self.acts:
            y = act(y)
        return self.table["act"](y)


def get_inputs():
    return [torch.rand(8, 16)]


def get_init_inputs():
    return [16, OUT, 0.2]
'''.replace("OUT", str(N))


def test_a_module_kept_in_a_plain_list_or_dict_has_its_settings_guarded(tmp_path):
    """Stateless modules kept in a plain list or dict are no submodules of the model's, yet the
    trace bakes their settings in (a LeakyReLU's slope): a ModelNew built with another slope is
    refused naming it (it computed with the traced one in silence)."""
    path = tmp_path / "listed.py"
    path.write_text(LISTED)
    ref = Reference(path)
    assert dict(trace(ref).hyperparameters) == {"acts[0].negative_slope": 0.2, "table['act'].alpha": 0.5}
    ModelNew, _ = _emitted_model_new(ref, tmp_path)
    assert "synthesized for" not in _forward_error(ModelNew(16, N, 0.2))
    refused = _forward_error(ModelNew(16, N, 0.3))
    assert refused.startswith("ValueError: this ModelNew was synthesized for") and "acts[0].negative_slope=0.2" in refused
