"""BatchNorm's and GroupNorm's statistics in a 16-bit build are eager's. On an H100 kgen's bf16
GEMM is cuBLAS's to the bit (docs/perf.md, session 9), so the statistics were what KernelBench's
bf16 eval saw differ. BatchNorm's: those of its input t as eager's BatchNorm sees it (the
Linear's output and each step after it rounded to the module's dtype; an fp32 build takes those
of S, what stage 1 stores, and finalize moves them to t). GroupNorm's: torch's Welford
statistics in its order. Here: the generated code, for modules written with the bias, without
it, and with a scale between the Linear and BatchNorm."""
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


def test_group_norm_statistics_as_torch_takes_them_in_a_16_bit_build(tmp_path):
    """GroupNorm in a 16-bit build: torch's own Welford statistics (each lane's elements, then the
    warp's tree), its eps in the module's dtype, rsqrtf, the mean and 1/std rounded to the
    module's dtype; an fp32 build keeps the two passes."""
    src = module_source("x = self.gn(x)", {"gn": "nn.GroupNorm(4, out_features)"}, 16)
    ref = tmp_path / "m.py"
    ref.write_text(src)
    low = lower(graph(str(ref), 8, 16, 16).parts[0], True, False)
    fp32, half = low.cuda.split("if constexpr (std::is_same<kgen_operand_t, float>::value) {", 1)[1].split("else {", 1)
    assert "kgen::warp_sum(sum)" in fp32 and "1.0f / sqrtf(q / static_cast<float>(size) + " in fp32
    assert "kgen::welford_add(acc, " in half and "acc = kgen::welford_warp_reduce(acc);" in half
    # the mean and 1/std rounded to the module's dtype, as torch 2.11 normalizes with them
    assert "= kgen::rounded_to_module<kgen_operand_t>(acc.mean);" in half
    assert ("= kgen::rounded_to_module<kgen_operand_t>(rsqrtf(acc.m2 / acc.nf + "
            "kgen::rounded_to_module<kgen_operand_t>(9.99999975e-06f)));") in half
