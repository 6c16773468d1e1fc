"""The CPU side of a search: what is dropped before building and why, the measurement cache,
the one-winner-per-tier files and their index."""

import json
import re
from pathlib import Path

import pytest

from kgen.tune.spec import FP32_ACCURATE_MATHS

from kgen.codegen import generator
from kgen.tune.search import (MeasurementCache, enumerate_specs, probe_maths, prune, read_index,
                         record_winner, winner_path)
from kgen.tune.spec import Spec, Tile

H100_SMS = 132


def test_probe_drops_modes_whose_rounding_alone_breaks_the_tolerance():
    """TF32 operands (10-bit mantissa) cannot meet 1e-4; BF16 (7 bits) not even 1e-2."""
    found = probe_maths("gemm_scale_bn", 64, 1024, 256, ["tf32", "bf16", "tf32x3", "fp32_simt"],
                        [1e-4, 1e-2], "cpu")
    assert set(found) == {"tf32", "bf16"}  # the fp32-accurate modes are not probed
    assert found["tf32"][0] == [1e-2]
    assert found["bf16"][0] == []
    assert "max abs error" in found["bf16"][1]


def test_probe_of_a_module_with_dropout_measures_rounding_not_two_masks():
    """A Dropout in training mode (KernelBench 66's kind): eager fp32's error and each mode's come
    from one RNG state, so they are the roundings' (they were two masks' difference: the fp64
    forward and the fp32 one drew one after the other)."""
    ref = str(Path(__file__).parent / "refs" / "gemm_dropout_scale_softmax.py")
    eager = {}
    found = probe_maths(ref, 64, 256, 128, ["tf32", "bf16"], [1e-4, 1e-2], "cpu", eager=eager)
    assert eager["max_abs"] < 1e-6 and eager["within"] == [1e-4, 1e-2], eager
    for math, (_, why) in found.items():
        errors = [float(e) for e in re.findall(r"error ([0-9.e+-]+) \(torch.randn input: ([0-9.e+-]+)\)", why)[0]]
        assert max(errors) < 1e-2, (math, why)   # (two masks: errors of ~0.1)


def test_probe_rounds_the_gates_torch_randn_input_too():
    """bf16 products meet 1e-2 on the reference's torch.rand input and miss it on torch.randn's,
    which the gate's full validation draws too (KernelBench 12's case, at a shape the CPU runs in
    seconds): the probe admits bf16 for no tier where the gate would fail it, and names both errors."""
    ref = str(Path(__file__).parent / "refs" / "gemm_mul_leakyrelu.py")
    found = probe_maths(ref, 512, 8192, 512, ["tf32", "bf16", "fp16"], [1e-2], "cpu")
    errors = {m: tuple(map(float, re.findall(r"error ([0-9.e+-]+) \(torch.randn input: ([0-9.e+-]+)\)", why)[0]))
              for m, (_, why) in found.items()}
    assert errors["bf16"][0] < 1e-2 < errors["bf16"][1], found["bf16"]
    assert found["bf16"][0] == []
    assert found["tf32"][0] == [1e-2]
    # fp16 products keep TF32's 11 significant bits: near TF32's error (rounded to nearest, not
    # truncated as TF32's first product is), several times below bf16's.
    assert found["fp16"][0] == [1e-2]
    assert max(errors["fp16"]) < 2 * max(errors["tf32"]) and max(errors["fp16"]) < max(errors["bf16"]) / 4, errors


def test_probe_drops_fp16_where_an_operand_is_beyond_its_range(tmp_path):
    """An input of magnitude 1e5 is infinite in fp16 (65504 its largest), so fp16 products would
    give infinities where fp32 gives finite outputs: the probe drops fp16 and says why (bf16 and
    TF32 keep fp32's exponent range)."""
    ref = tmp_path / "large_inputs.py"
    ref.write_text("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
                   "    def __init__(self, in_features, out_features):\n        super().__init__()\n"
                   "        self.gemm = nn.Linear(in_features, out_features)\n\n"
                   "    def forward(self, x):\n        return torch.relu(self.gemm(x))\n\n\n"
                   "batch_size, in_features, out_features = 64, 256, 128\n\n\n"
                   "def get_inputs():\n    return [torch.rand(batch_size, in_features) * 1e5]\n\n\n"
                   "def get_init_inputs():\n    return [in_features, out_features]\n")
    found = probe_maths(str(ref), 64, 256, 128, ["tf32", "bf16", "fp16"], [1e-2, 1e-1], "cpu")
    assert found["fp16"][0] == [], found["fp16"]
    assert "the input beyond fp16's range" in found["fp16"][1] and "torch.randn" not in found["fp16"][1].split(";")[1]
    assert "range" not in found["bf16"][1] and "range" not in found["tf32"][1]


CHAINED_SECOND_GEMMS = ["self.fc2(h)", "F.linear(input=h, weight=self.fc2.weight, bias=self.fc2.bias)",
                        "torch.addmm(self.fc2.bias, mat1=h, mat2=self.fc2.weight.t())", "h @ self.fc2.weight.t() + self.fc2.bias",
                        "torch.einsum('bk,nk->bn', h, self.fc2.weight) + self.fc2.bias"]


@pytest.mark.parametrize("second", CHAINED_SECOND_GEMMS)
def test_probe_rounds_a_chained_gemms_input_as_its_kernel_does(tmp_path, second):
    """Two GEMMs: the second's input, h = relu(z1) * 1e6, passes fp16's range while the module's
    input and weights stay inside it. Each GEMM's kernel rounds its own input (the x pass), so the
    probe does too, whichever way the second GEMM is spelled (keywords as the frontend binds them):
    fp16 is dropped, the note says where, and bf16 (fp32's range) is not."""
    ref = tmp_path / "chained.py"
    ref.write_text("import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\nclass Model(nn.Module):\n"
                   "    def __init__(self, in_features, out_features):\n        super().__init__()\n"
                   "        self.fc1 = nn.Linear(in_features, out_features)\n"
                   "        self.fc2 = nn.Linear(out_features, out_features)\n\n"
                   f"    def forward(self, x):\n        h = torch.relu(self.fc1(x)) * 1e6\n        return {second}\n\n\n"
                   "batch_size, in_features, out_features = 64, 256, 128\n\n\n"
                   "def get_inputs():\n    return [torch.rand(batch_size, in_features)]\n\n\n"
                   "def get_init_inputs():\n    return [in_features, out_features]\n")
    found = probe_maths(str(ref), 64, 256, 128, ["bf16", "fp16"], [1e-2, 1e3], "cpu")
    assert found["fp16"][0] == [] and "a GEMM's operand inside the module beyond fp16's range" in found["fp16"][1]
    assert "range" not in found["bf16"][1] and found["bf16"][0] == [1e3], found["bf16"]


def test_probe_rounds_no_operand_of_a_per_feature_einsum(tmp_path):
    """einsum('bn,n->bn') is a per-feature product, computed in fp32 by the epilogue: its scale of
    1e5 is not a GEMM operand, so fp16 is not dropped for its range."""
    ref = tmp_path / "scaled.py"
    ref.write_text("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
                   "    def __init__(self, in_features, out_features):\n        super().__init__()\n"
                   "        self.fc = nn.Linear(in_features, out_features)\n"
                   "        self.scale = nn.Parameter(torch.full((out_features,), 1e5))\n\n"
                   "    def forward(self, x):\n        return torch.einsum('bn,n->bn', self.fc(x), self.scale)\n\n\n"
                   "batch_size, in_features, out_features = 64, 256, 128\n\n\n"
                   "def get_inputs():\n    return [torch.rand(batch_size, in_features)]\n\n\n"
                   "def get_init_inputs():\n    return [in_features, out_features]\n")
    found = probe_maths(str(ref), 64, 256, 128, ["fp16"], [1e-2, 1e3], "cpu")
    assert "range" not in found["fp16"][1] and found["fp16"][0] == [1e3], found["fp16"]


def test_cost_model_keeps_the_fast_family_of_each_tier_only():
    specs = enumerate_specs("gemm_scale_bn", 1024, 8192, 8192)
    tight = {1e-4: set(FP32_ACCURATE_MATHS)}
    live = [s for s in specs if s.math in tight[1e-4]]
    dropped = prune(live, tight, H100_SMS)
    kept = [s for s in live if s not in dropped]
    # fp16x3 predicted fastest (its split included); tf32x3, ~1.4x behind it (measured), keeps
    # its best candidate only: the fallback where fp16x3 fails the gate. The smallest tiles,
    # ~1.4-1.9x slower than 128 x 128 ones on this shape, are not built (docs/perf.md, session 25).
    assert kept and {(s.backend, s.math) for s in kept} == {("wgmma", "fp16x3"), ("wgmma", "tf32x3")}
    assert len([s for s in kept if s.math == "tf32x3"]) == 1
    assert [s.tile.bm for s in kept if s.math == "tf32x3"] == [128]
    assert not any((s.tile.bm, s.tile.bn) == (64, 64) for s in kept)
    assert all("cost model" in why for why in dropped.values())
    # A looser tier keeps its own fastest (cuBLAS TF32), and the tight tier's winners stay.
    both = {1e-4: set(FP32_ACCURATE_MATHS), 1e-2: {*FP32_ACCURATE_MATHS, "tf32"}}
    live = [s for s in specs if s.math not in ("bf16", "fp16")]
    kept = [s for s in live if s not in prune(live, both, H100_SMS)]
    assert {(s.backend, s.math) for s in kept} == {("wgmma", "fp16x3"), ("wgmma", "tf32x3"), ("cublas", "tf32")}


def test_cost_model_counts_the_tail_wave():
    """At batch 128 and 1024 features in and out, 128x128 tiles leave most SMs idle even split
    in two in K (16 CTAs; K is too short for more); 64x64 tiles, also split in two, leave fewer
    (64 CTAs)."""
    specs = [s for s in enumerate_specs("gemm_scale_bn", 128, 1024, 1024, maths=("tf32x3",))
             if s.backend == "wgmma"]
    from kgen.tune.search import predicted_ms

    by_tile = {(s.tile.bm, s.tile.bn): predicted_ms(s, H100_SMS) for s in specs}
    assert by_tile[(64, 64)] < by_tile[(128, 128)]


def test_cost_model_counts_split_k_at_a_small_batch():
    """At batch 128 and 8192 features the Hopper GEMMs split each of the 64 tiles of 128x128 in
    two in K (configs.k_splits), which fills the GPU: those tiles, measured fastest there (fp16x3
    0.141-0.156 ms, tf32x3 0.165-0.185 ms on an H100, docs/perf.md session 27), are built; the
    smaller tiles that fill it with more CTAs and less reuse are not."""
    from kgen.tune.search import predicted_ms

    specs = [s for s in enumerate_specs("gemm_scale_bn", 128, 8192, 8192) if s.math in FP32_ACCURATE_MATHS]
    dropped = prune(specs, {1e-4: set(FP32_ACCURATE_MATHS)}, H100_SMS)
    kept = {(s.math, s.tile.bm, s.tile.bn) for s in specs if s not in dropped}
    assert kept == {("fp16x3", 128, 128), ("tf32x3", 128, 128)}
    square = [s for s in specs if s.backend == "wgmma" and (s.tile.bm, s.tile.bn) == (128, 128)]
    by_math = {s.math: predicted_ms(s, H100_SMS) for s in square}
    assert 0.12 < by_math["fp16x3"] < by_math["tf32x3"] < 0.19   # (measured above, the epilogue beside)


def test_cache_answers_only_what_it_measured(tmp_path):
    cache = MeasurementCache(tmp_path / "m.json")
    spec = enumerate_specs("gemm_scale_bn", 1024, 8192, 8192, maths=("tf32x3",))[0]
    passed = {"status": "passed", "passing_tols": [1e-4, 1e-2], "measured": {"median_ms": 1.0}}
    cache.store_evaluation(spec, "H100", [1e-4, 1e-2], 30, passed)
    again = MeasurementCache(tmp_path / "m.json")  # persisted
    assert again.evaluation(spec, "H100", [1e-4], 30)["measured"] == {"median_ms": 1.0}
    assert again.evaluation(spec, "H100", [1e-4], 100) is None         # more iterations asked
    assert again.evaluation(spec, "H200", [1e-4], 30) is None          # another device
    other_shape = enumerate_specs("gemm_scale_bn", 2048, 8192, 8192, maths=("tf32x3",))[0]
    assert other_shape.key() == spec.key()
    assert again.evaluation(other_shape, "H100", [1e-4], 30) is None   # another shape

    incorrect = {"status": "incorrect", "passing_tols": []}
    cache.store_evaluation(spec, "B", [1e-4], 30, incorrect)
    assert cache.evaluation(spec, "B", [1e-4], 30)["status"] == "incorrect"
    assert cache.evaluation(spec, "B", [1e-4, 1e-2], 30) is None       # 1e-2 never tried
    cache.store_evaluation(spec, "C", [1e-4], 30, {"status": "runtime_error"})
    assert cache.evaluation(spec, "C", [1e-4], 30) is None             # crashes are retried

    assert not cache.full_validation(spec, "H100", 1e-4)
    cache.store_full_validation(spec, "H100", 1e-4)
    assert MeasurementCache(tmp_path / "m.json").full_validation(spec, "H100", 1e-4)


def test_one_winner_per_tier_replaces_the_earlier_one_and_is_indexed(tmp_path):
    a, b = enumerate_specs("gemm_scale_bn", 1024, 8192, 8192, maths=("tf32x3",))[:2]
    assert winner_path(tmp_path, a, 1e-4) == winner_path(tmp_path, b, 1e-4)
    assert winner_path(tmp_path, a, 1e-4).name == "gemm_scale_bn_b1024_i8192_o8192_tol0.0001.py"
    path = winner_path(tmp_path, a, 1e-4)
    assert record_winner(tmp_path, path, a, 1e-4, {"median_ms": 1.2}) is None
    previous = record_winner(tmp_path, path, b, 1e-4, {"median_ms": 1.1})
    assert previous["variant"] == a.name()
    index = read_index(tmp_path)
    assert list(index["winners"]) == [path.name]
    assert index["winners"][path.name]["variant"] == b.name()
    assert json.loads((tmp_path / "index.json").read_text()) == index


@pytest.mark.parametrize("problem", ["gemm_scale_bn", "gemm_bn_scale_softmax"])
def test_candidates_render_without_the_shape_in_their_code(problem):
    """Problems 33 and 39 share builds: the kernel source carries no shape."""
    a = enumerate_specs(problem, 1024, 8192, 8192)
    b = enumerate_specs(problem, 16384, 4096, 4096)
    assert {s.key() for s in a} == {s.key() for s in b}
    for s in a[:3]:
        assert "8192" not in generator.render_cuda_source(s)


@pytest.mark.parametrize("in_features", [8192, 1001])
def test_a_forward_gemm_never_compiles_the_non_tma_fallback(in_features):
    """The wgmma GEMM's fallback (K % 4 != 0) is a sixth of a file's nvcc time (docs/perf.md): a forward GEMM
    does not instantiate it (ModelNew pads a K that TMA cannot read: the fallback, scalar loads and
    no split-K, took 3x cuBLAS's time; session 56); the backward's GEMMs (K the batch, any value)
    always do."""
    import re

    spec = next(s for s in enumerate_specs("gemm_scale_bn", 1024, in_features, 512) if s.family == "wgmma")
    source = generator.render_cuda_source(spec)
    forward = re.search(r"using Gemm = std::conditional_t<std::is_same<\w+, float>::value, (kgen::WgmmaWsGemm<[^>]*>)",
                        source).group(1)
    backward = re.search(r"using BackwardGemm = (kgen::WgmmaWsGemm<[^>]*>);", source).group(1)
    assert forward.endswith(", false>"), forward
    assert not backward.endswith(", false>"), backward


def test_an_optimistic_probe_does_not_cost_a_tier_its_accurate_candidates():
    """Softmax outputs are small: TF32 and BF16 rounding alone may stay under 1e-4 (problem 84).
    The tier still keeps the fastest fp32-accurate candidates in case the kernels do not."""
    specs = enumerate_specs("gemm_bn_scale_softmax", 1024, 8192, 8192)
    admissible = {1e-4: {"fp32_simt", "tf32x3", "tf32", "bf16"}}
    kept = [s for s in specs if s not in prune(specs, admissible, H100_SMS)]
    assert ("cublas", "bf16") in {(s.backend, s.math) for s in kept}
    assert any((s.backend, s.math) == ("wgmma", "tf32x3") for s in kept)
    assert not any(s.math == "fp32_simt" for s in kept)


def test_a_rewrite_candidate_does_not_prune_the_gemms():
    """The matrix-vector rewrite is predicted far faster than any GEMM, but it may fail
    validation: the GEMM candidates stay, so the search has a fallback."""
    from kgen.tune.search import enumerate_specs, prune

    ref = str(Path(__file__).resolve().parent / "refs" / "gemm_sum_max_mean_lse.py")
    specs = enumerate_specs(ref, 1024, 8192, 8192, maths=("tf32x3",), include_cublas=False)
    assert any(s.family == "gemv" for s in specs)
    dropped = prune(specs, {1e-4: {"tf32x3", "fp32_simt"}}, 132)
    kept = [s for s in specs if s not in dropped]
    assert any(s.family == "gemv" for s in kept)
    assert any(s.family == "wgmma" for s in kept)


def test_an_ill_conditioned_module_keeps_the_variant_with_eagers_rounding():
    """Where eager fp32 is itself beyond the tolerance of fp64 (KernelBench 14's cancelling row
    sums), only eager's own rounding passes a judge that compares with eager: the cuBLAS fp32
    variant (eager's GEMM, eager's order of row sums), which the cost model drops as slow, is
    measured after all; nothing else is taken back."""
    from kgen.tune.search import keep_eagers_rounding

    ref = str(Path(__file__).resolve().parent / "refs" / "gemm_sigmoid_sum.py")
    specs = enumerate_specs(ref, 1024, 8192, 8192)
    dropped = prune(specs, {1e-4: {"fp32_simt", "tf32x3"}}, H100_SMS)
    eagers = [s for s in dropped if (s.family, s.math) == ("cublas", "fp32_simt")]
    assert len(eagers) == 1
    others = {s: why for s, why in dropped.items() if s not in eagers}
    assert keep_eagers_rounding(dropped) == eagers
    assert dropped == others


def _passing(tmp_path, medians):
    from kgen.tune.search import Candidate

    spec = Spec.of("gemm_scale_bn", 1024, 8192, 8192, math="tf32x3", backend="wgmma", fusion=1,
                   tile=Tile(128, 128, 32, 16, 128, stages=4))
    return [Candidate(spec, tmp_path / f"c{i}.py", status="passed",
                      record={"measured": {"median_ms": ms}}) for i, ms in enumerate(medians)]


def test_runoff_takes_the_fastest_within_the_margin_only(tmp_path):
    from kgen.tune.search import RUNOFF_MARGIN, runoff_contenders

    a, b, c, d = _passing(tmp_path, [1.000, 1.000 + RUNOFF_MARGIN * 0.9, 1.000 + RUNOFF_MARGIN * 0.95, 1.01])
    assert runoff_contenders([a, b, c, d]) == [a, b, c]       # at most RUNOFF_MAX (3)
    far = _passing(tmp_path, [1.0, 1.0 + 2 * RUNOFF_MARGIN])
    assert runoff_contenders(far) == []                        # one contender: nothing to run off
    assert runoff_contenders([]) == []


def test_runoff_orders_by_the_median_of_its_rounds(tmp_path):
    from kgen.tune.search import runoff_order

    a, b = _passing(tmp_path, [1.000, 1.010])
    # a's single measurement was lucky: its rounds are slower than b's but for one outlier
    times = {"eager": [2.8] * 10, str(a.path): [1.00, 1.05, 1.05, 1.06, 1.05],
             str(b.path): [1.02, 1.02, 1.03, 1.20, 1.02]}
    assert runoff_order([a, b], times) == [b, a]
    assert (a.runoff_ms, b.runoff_ms) == (1.05, 1.02)
    assert b.summary()["runoff_ms"] == 1.02


def test_a_search_never_replaces_another_references_winner_or_record(tmp_path):
    """Two references of one file name (two `model.py`) at one shape and tier: the second's
    winner and record get its sha256 prefix instead of replacing the first's."""
    from kgen.tune.search import distinct_path

    mine, theirs = "a" * 64, "b" * 64
    winner = tmp_path / "model_b8_i16_o32_tol0.0001.py"
    record = tmp_path / "search_model_b8_i16_o32_tol0.0001.json"
    assert distinct_path(winner, mine) == winner   # nothing there yet
    winner.write_text(f"KGEN_REFERENCE_SHA256 = '{theirs}'\n")
    record.write_text(json.dumps({"reference_sha256": theirs}, indent=1))
    assert distinct_path(winner, mine).name == "model_b8_i16_o32_tol0.0001_aaaaaaaa.py"
    assert distinct_path(record, mine).name == "search_model_b8_i16_o32_tol0.0001_aaaaaaaa.json"
    assert distinct_path(winner, theirs) == winner and distinct_path(record, theirs) == record


def test_the_results_table_gives_each_time_against_eager_tf32_where_measured():
    """The relaxed tiers' yardstick is eager with TF32 GEMMs (bench measures it beside eager fp32 in
    an fp32 search): the table's "x TF32" column is the candidate's median over it, '-' in a 16-bit
    module's search (bench's record names the dtype and its eager_tf32_ms is eager in that dtype)
    or where the candidate was not timed."""
    from kgen.check.bench import BenchResult, Timing
    from kgen.tune.search import Candidate, results_table

    spec = Spec.of("gemm_scale_bn", 1024, 8192, 8192, math="fp16", backend="wgmma", fusion=1,
                   tile=Tile(128, 128, 32, 16, 128, stages=3))

    def record(dtype):
        t = lambda ms: Timing(ms, ms, ms)   # noqa: E731 - (median, p20, p80)
        return BenchResult("GPU", 1024, t(0.3), t(3.0), t(0.4), 1e-3, 1e-4, None, "eval", dtype).measured(1e-2)

    rows = results_table([
        Candidate(spec, Path("a.py"), status="passed", record={"measured": record("float32"), "passing_tols": [1e-2]}),
        Candidate(spec, Path("b.py"), status="passed", record={"measured": record("bfloat16")}),
        Candidate(spec, Path("c.py"), status="pruned", detail="cost model"),
    ]).splitlines()
    assert rows[0].split()[:7] == ["status", "median", "ms", "x", "eager", "x", "TF32"]
    # (each row: status, median ms, x eager, x TF32, ...)
    assert [r.split()[3] for r in rows[1:]] == ["0.750", "-", "-"]


def test_benchs_report_says_what_its_times_hold():
    """`kgen bench` times calls queued under no_grad (the GPU's work); KernelBench's eval
    synchronizes after each call with gradients on. Its report says which, and each ratio is the
    medians' (ModelNew 0.3 ms against eager's 3.0 and TF32's 0.4)."""
    from kgen.check.bench import BenchResult, Timing

    t = lambda ms: Timing(ms, ms, ms)   # noqa: E731 - (median, p20, p80)
    lines = BenchResult("GPU", 1024, t(0.3), t(3.0), t(0.4), 1e-3, 1e-4).report().splitlines()
    assert "calls queued under no_grad" in lines[0] and "KernelBench's eval synchronizes" in lines[0]
    assert "0.100x its time (10.00x speedup)" in lines[2] and "0.750x its time" in lines[3]
