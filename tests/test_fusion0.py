"""Fusion 0: the point-wise chain after the Linear's output in a kernel of its own (stage 2),
where the GEMM's epilogue would run it as the tile is stored. What the lowering makes of it,
which modules it applies to, the rule that no longer picks it (16-bit modules whose chain calls
accurate math functions went to fusion 0 from session 12's measurements, when the epilogue ran
on the consumer warps' registers; fusion 1 measured as fast or faster in session 32: docs/perf.md)
and the 16-bit search still trying it. The generated files' builds: tests/test_compile.py (OUTPUT_TYPE_FUSION); on
the GPU: tests/test_half_gpu.py runs the modules of tests/refs with such a chain at fusion 0."""

import pytest

from conftest import module_source
from kgen.codegen import generator
from kgen.lower import forward
from kgen.tune import choose, search
from kgen.tune.spec import Spec, Tile, Workload

TILE = Tile(128, 128, 32, 16, 128, stages=4)
MISH = "x = torch.nn.functional.mish(x)\nx = x * 2.0"
CHEAP = "x = x * 2.0\nx = torch.relu(x)"
BATCHNORM = "x = self.bn(x)\nx = torch.sigmoid(x)"


def spec(tmp_path, body, fusion, params=None, batch=256, name="m"):
    ref = tmp_path / f"{name}.py"
    ref.write_text(module_source(body, params or {}, 512))
    return Spec.of(str(ref), batch, 512, 512, math="tf32x3", backend="wgmma", fusion=fusion, tile=TILE)


def test_the_gemm_stores_the_linears_output_and_stage_2_runs_the_chain(tmp_path):
    low = generator.lowered(spec(tmp_path, MISH, 0))
    assert low.deferred_chain
    assert low.eval.stored == forward.linear_output(low.graph) != low.graph.output
    assert low.eval.stage2 == forward.STAGE2_POINTWISE and low.train.stage2 == forward.STAGE2_POINTWISE
    # The forward that keeps z for the backward makes the output in one pass: the whole chain,
    # which the eval epilogue no longer holds.
    keep = low.cuda.split("struct KeepZEpilogue {")[1].split("\n};")[0]
    evaluation = low.cuda.split("struct EvalEpilogue {")[1].split("\n};")[0]
    assert "expf" in keep or "log1pf" in keep
    assert "expf" not in evaluation and "log1pf" not in evaluation
    fused = generator.lowered(spec(tmp_path, MISH, 1))
    assert not fused.deferred_chain and fused.eval.stage2 == forward.STAGE2_NONE
    assert "using KeepZEpilogue = EvalEpilogue;" in fused.cuda
    # S, the Linear's output rounded by the epilogue, may be stored in a 16-bit module's dtype
    # (forward.cuh, StageInput); a row kernel's S, BatchNorm's raw z, stay fp32.
    for struct in ("TrainStage2", "EvalStage2"):
        assert _stage2(low, struct).count("kSModuleTyped = true") == 1


def _stage2(low, struct: str) -> str:
    return low.cuda.split(f"struct {struct} {{")[1].split("\n};")[0]


@pytest.mark.parametrize("body, params, typed", [
    ("x = torch.softmax(torch.sigmoid(x), dim=1)", {}, {"TrainStage2": True, "EvalStage2": True}),
    ("x = torch.softmax(x, dim=1)", {}, {"TrainStage2": True, "EvalStage2": True}),
    (BATCHNORM, {"bn": "nn.BatchNorm1d(out_features)"}, {"TrainStage2": False, "EvalStage2": False}),
    ("x = x * 2.0\nx = torch.sigmoid(x)", {}, {"TrainStage2": False, "EvalStage2": False})],
    ids=["rows of a rounded op", "rows of the Linear's output", "batchnorm", "whole chain in the epilogue"])
def test_s_is_module_typed_where_it_is_a_rounded_op_no_batchnorm_statistics_read(tmp_path, body, params, typed):
    """S in the module's dtype where a stage 2 (point-wise or rows) reads a value the epilogue
    rounds to it anyway (sigmoid's output; the Linear's, z + bias rounded once as addmm rounds
    it); fp32 where training BatchNorm's statistics read it, and where no stage 2 runs (eval
    BatchNorm and the chain in the epilogue: the output is stored)."""
    low = generator.lowered(spec(tmp_path, body, 1, params))
    for struct, expect in typed.items():
        assert f"kSModuleTyped = {str(expect).lower()}" in _stage2(low, struct), struct


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_fusion_0_gives_fusion_1s_bits_in_16_bits(tmp_path, dtype):
    """The chain in stage 2 over a 16-bit S (fusion 0) and in the GEMM's epilogue (fusion 1) round
    each op alike: the same output bit for bit, in training and eval mode."""
    import torch

    from kgen.check.loading import EmittedFile

    if not (torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)):
        pytest.skip("the wgmma GEMM needs a Hopper (sm_90) GPU")
    dt = getattr(torch, dtype)
    files = [EmittedFile(generator.write(spec(tmp_path, MISH, f, batch=257), tmp_path / f"f{f}.py")) for f in (0, 1)]
    torch.manual_seed(0)
    x = torch.randn(257, 512, device="cuda").to(dt)
    outs = []
    for f in files:
        torch.manual_seed(1)
        model = f.ModelNew(*f.init_args()).cuda().to(dt)
        with torch.no_grad():
            outs.append([model.train()(x), model.eval()(x)])
    assert all(torch.equal(a, b) for a, b in zip(*outs))


@pytest.mark.parametrize("body, params", [(BATCHNORM, {"bn": "nn.BatchNorm1d(out_features)"}),
                                          ("x = torch.logsumexp(x, dim=1, keepdim=True)", {})],
                         ids=["batchnorm", "row reduction"])
def test_a_part_without_a_point_wise_chain_is_fusion_1s_code(tmp_path, body, params):
    """BatchNorm and row reductions have stages of their own: fusion 0 leaves them as fusion 1
    does, and the file's header says so."""
    at0, at1 = (spec(tmp_path, body, f, params) for f in (0, 1))
    assert not generator.lowered(at0).deferred_chain
    assert generator.lowered(at0).cuda == generator.lowered(at1).cuda
    assert "no point-wise chain after the Linear" in "\n".join(generator.describe_variant(at0))


def test_the_chain_s_math_calls_are_counted_from_the_op_table(tmp_path):
    costly = generator.lowered(spec(tmp_path, MISH, 1)).graph
    cheap = generator.lowered(spec(tmp_path, CHEAP, 1, name="c")).graph
    assert forward.chain_math_calls(costly) >= 2      # mish: softplus's exp and log, tanh
    assert forward.chain_math_calls(cheap) == 0


def test_the_rule_keeps_every_chain_in_the_gemms_epilogue(tmp_path):
    def rule(body, dtype, params=None, batch=256, name="m"):
        return choose.rule_fusion(spec(tmp_path, body, 1, params, batch, name).workload, dtype)[0]

    # measured (session 32): fusion 0 no faster in bf16, with or without math calls; in fp32 no gain
    assert rule(MISH, "bf16") != 0 and rule(MISH, "fp16") != 0 and rule(MISH, "fp32") != 0
    assert rule(CHEAP, "bf16", name="c") != 0
    bn = {"bn": "nn.BatchNorm1d(out_features)"}
    assert rule(BATCHNORM, "bf16", bn, 1024, "b") == 2 and rule(BATCHNORM, "fp32", bn, 1024, "b") == 1


def test_the_16_bit_search_tries_fusion_0_where_a_chain_can_move(tmp_path):
    for body, params, expected in [(MISH, {}, True), (BATCHNORM, {"bn": "nn.BatchNorm1d(out_features)"}, False)]:
        workload = spec(tmp_path, body, 1, params, name=f"s{expected}").workload
        variants = search.half_variants(workload, search.enumerate_variants(workload))
        assert any(v.fusion == 0 for v in variants) == expected
        assert all(v.fusion != 0 for v in search.enumerate_variants(workload))   # fp32: not searched


def test_an_fp32_winner_for_a_16_bit_module_changes_only_where_the_code_would(tmp_path, monkeypatch):
    """A 16-bit module that takes an fp32 search's winner: a BatchNorm module at a batch where 16
    bits fuse its statistics and fp32 does not gets fusion 2 (and no claimed measurement); a chain,
    costly or not, keeps the winner as measured (its levels 1 and 2 are the same code)."""
    measured = {"median_ms": 1.2, "ratio": 0.45, "device": "GPU"}
    bn = {"bn": "nn.BatchNorm1d(out_features)"}
    for body, params, name, expected, keeps_measurement in [
            (MISH, None, "costly", 1, True), (CHEAP, None, "cheap", 1, True), (BATCHNORM, bn, "bn", 2, False)]:
        winner = spec(tmp_path, body, 1, params, batch=1024, name=name)
        monkeypatch.setattr(choose, "earlier_winner",   # an fp32 search's record only
                            lambda *a, winner=winner: (winner, measured, tmp_path / "r.json") if a[-1] == "fp32" else None)
        got, why, header = choose.fastest_known(winner.problem, 1024, 512, 512, choose.target("sm_90a"),
                                                dtype="bf16")
        assert got.fusion == expected, why
        assert (header is not None) == keeps_measurement


def test_a_part_with_a_broadcast_tail_is_left_as_fusion_1_by_every_decision(tmp_path):
    """A costly chain whose output a broadcast tail reads (sigmoid(x W^T - s) * x): the lowering
    keeps it in the epilogue (its forward keeping z makes the tail's core value there), and the
    rule and the 16-bit search, asking lower.forward.fusion0_moves, neither pick nor try fusion 0."""
    from test_tail_backward import reference
    from kgen.frontend.trace import trace

    ref = reference("tile_core", tmp_path)
    at0 = Spec.of(str(ref.path), 64, ref.input.shape[1], trace(ref).out_features, math="tf32x3",
                  backend="wgmma", fusion=0, tile=TILE)
    assert [forward.fusion0_moves(part) for part in at0.graph().parts] == [None]
    assert not generator.lowered(at0).deferred_chain
    assert choose.rule_fusion(at0.workload, "bf16")[0] != 0
    assert all(v.fusion != 0 for v in search.half_variants(at0.workload, search.enumerate_variants(at0.workload)))
