"""BatchNorm's statistics in a 16-bit build are those of its input t as eager's BatchNorm sees
it (the Linear's output and each step after it rounded to the module's dtype), in an fp32 build
those of S, what stage 1 stores (finalize moves them to t). On an H100 kgen's bf16 GEMM is
cuBLAS's to the bit (docs/perf.md, session 9), so the statistics were what KernelBench's bf16
eval saw differ. Here: the generated BnInput::stat and the epilogue that takes the statistics,
for modules written with the bias, without it, and with a scale between the Linear and
BatchNorm."""
import re

import pytest

from conftest import module_source
from kgen.frontend.problems import graph
from kgen.lower.forward import lower

ROUND = "kgen::rounded_to_module<kgen_operand_t>"


def _bn_structs(tmp_path, body: str, params: dict, bias: bool = True) -> tuple[str, str]:
    src = module_source(body, params, 16)
    if not bias:
        src = src.replace("nn.Linear(in_features, out_features)", "nn.Linear(in_features, out_features, bias=False)")
    ref = tmp_path / "m.py"
    ref.write_text(src)
    low = lower(graph(str(ref), 8, 16, 16).parts[0], True, False)
    bn_input = re.search(r"struct BnInput \{.*?\n\};", low.cuda, re.S).group(0)
    train = re.search(r"struct TrainEpilogue \{.*?\n\};", low.cuda, re.S).group(0)
    assert low.cuda.index("struct BnInput") < low.cuda.index("struct TrainEpilogue"), \
        "the epilogue asks BnInput for stat: declared first"
    return bn_input, train


def _stat_body(bn_input: str) -> list[str]:
    body = bn_input[bn_input.index("} else {"):]
    return [line.strip() for line in body.splitlines()[1:] if line.strip() not in ("}", "};")]


@pytest.mark.parametrize("bias", [True, False])
def test_statistics_of_t_rounded_as_eager_in_a_16_bit_build(tmp_path, bias):
    bn_input, train = _bn_structs(tmp_path, "x = self.bn(x)", {"bn": "nn.BatchNorm1d(out_features)"}, bias)
    assert "static constexpr bool kStatsOfT = !std::is_same<kgen_operand_t, float>::value;" in bn_input
    # fp32: the statistics of S itself
    assert "if constexpr (std::is_same<kgen_operand_t, float>::value) {\n      return s;" in bn_input
    body = _stat_body(bn_input)
    if bias:   # F.linear rounds once, after its bias
        assert any(f"{ROUND}(((s) + (v" in line for line in body), body
        assert sum(ROUND in line for line in body) == 1
    else:      # the Linear's output rounded by itself
        assert body[-1] == f"return {ROUND}(s);", body
    # fused statistics: the epilogue takes them of BnInput::stat, in registers only where that is S
    assert "static constexpr bool kStatsOfStored = !BnInput::kStatsOfT;" in train
    assert "return BnInput::stat(s, n, p);" in train


def test_each_step_between_the_linear_and_batchnorm_is_rounded(tmp_path):
    """Linear -> * scale -> BatchNorm (KernelBench 33): t = round(round(z + b) * scale)."""
    bn_input, _ = _bn_structs(tmp_path, "x = x * self.scale\nx = self.bn(x)",
                              {"scale": "nn.Parameter(torch.randn(out_features))",
                               "bn": "nn.BatchNorm1d(out_features)"})
    body = _stat_body(bn_input)
    rounded = [line for line in body if ROUND in line]
    assert len(rounded) == 2 and "+" in rounded[0] and "*" in rounded[1], body
    # the same steps as the affine fold, in the same order
    assert "shift = shift + " in bn_input and "scale = scale * " in bn_input


def test_no_batchnorm_no_stat(tmp_path):
    src = module_source("x = torch.relu(x)", {}, 16)
    ref = tmp_path / "m.py"
    ref.write_text(src)
    low = lower(graph(str(ref), 8, 16, 16).parts[0], True, False)
    bn_input = re.search(r"struct BnInput \{.*?\n\};", low.cuda, re.S).group(0)
    assert "stat(" not in bn_input and "kStatsOfStored" not in low.cuda
