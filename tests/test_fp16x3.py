"""fp16x3: the fp32-exact wgmma GEMM on three fp16 products (kernels/gemm_wgmma_f16x3.cuh). Where
the spec, the generator and the search use it; its numbers on the GPU are tests/test_gpu.py's
(every check of the gate at odd and ragged shapes, the error against SGEMM's)."""

import pytest
from click.testing import CliRunner

from kgen.cli import main
from kgen.codegen import generator
from kgen.tune.search import predicted_ms, prune
from kgen.tune.spec import FP16X3_TF32X3_STAGES, FP16X3_W_IN_REGISTERS_MAX_ROWS, Spec, SpecError, Tile

TILE = Tile(128, 128, 32, 16, 128, stages=3)
REF = "gemm_bn_scale_softmax"   # a module kgen ships (Linear, BatchNorm, scale, softmax)


def spec(batch=1024, k=8192, n=8192, math="fp16x3", fusion=2, problem=REF):
    return Spec.of(problem, batch, k, n, math=math, backend="wgmma", fusion=fusion, tile=TILE)


def test_the_forward_gemm_is_fp16x3_and_any_k_runs_tf32x3():
    s = spec()
    assert generator.gemm_type(s, 8192) == f"kgen::WgmmaWsF16x3Gemm<128, 128, 3, 2, 8, {FP16X3_W_IN_REGISTERS_MAX_ROWS}>"
    # The backward's GEMMs (any K) and a forward K that fp16 rows cannot be read at: tf32x3 on
    # the same tile with the tf32x3 rule's stages.
    tf32x3 = f"kgen::WgmmaWsGemm<kgen::MathMode::kTF32x3, 128, 128, {FP16X3_TF32X3_STAGES}, 2, 8"
    assert generator.gemm_type(s) == tf32x3 + ">"
    # A forward GEMM never runs the fallback: ModelNew pads a K that TMA cannot read.
    assert generator.gemm_type(s, 8188) == tf32x3 + ", false>"
    assert generator.gemm_type(s, 8190) == tf32x3 + ", false>"


def test_only_fp16x3_files_inline_its_kernel():
    needs = generator.kernel_needs(spec())
    assert needs.fp16x3
    files = generator.selected_files(generator.KERNEL_LIBRARY, needs)
    assert files.index("gemm_wgmma_half.cuh") < files.index("gemm_wgmma_f16x3.cuh")
    assert "gemm_wgmma_f16x3.cuh" not in generator.selected_files(
        generator.KERNEL_LIBRARY, generator.kernel_needs(spec(math="tf32x3", fusion=2).replace(
            tile=Tile(128, 128, 32, 16, 128, stages=4))))
    # A K that is not a multiple of 8 runs tf32x3 only: nothing of fp16x3's is inlined.
    assert not generator.kernel_needs(spec(k=8190)).fp16x3
    source = generator.render_cuda_source(spec())
    assert f"WgmmaWsF16x3Gemm<128, 128, 3, 2, 8, {FP16X3_W_IN_REGISTERS_MAX_ROWS}>" in source and "f16x3_split_kernel" in source


def test_fp16x3_is_the_wgmma_gemms_alone():
    with pytest.raises(SpecError, match="fp16x3 runs on kgen's Hopper GEMM only"):
        Spec.of(REF, 1024, 8192, 8192, math="fp16x3", backend="kgen", tile=Tile(128, 128, 32, 64, 32, stages=3))
    with pytest.raises(SpecError, match="shared memory"):
        spec().replace(tile=Tile(128, 128, 32, 16, 128, stages=4))   # 4 x 64 KB of operand tiles


def test_the_header_says_how_fp16x3_computes(tmp_path):
    out = tmp_path / "f.py"
    r = CliRunner().invoke(main, ["generate", "--problem", REF, "--math", "fp16x3", "-o", str(out), "--results-dir",
                                  str(tmp_path / "results")])
    assert r.exit_code == 0, r.output
    text = out.read_text()
    variant = next(line for line in text.splitlines() if line.startswith("variant:"))
    assert "fp16x3" in variant and "split into fp16 hi + lo" in variant, variant
    assert "'math': 'fp16x3'" in text


@pytest.mark.parametrize("shape, tile, kept", [
    ((1024, 8192, 8192), Tile(128, 128, 32, 16, 128, stages=3), True),
    # w split in the GEMM's registers (a square tile, at most FP16X3_W_IN_REGISTERS_MAX_ROWS rows): no pass over w
    ((128, 32768, 32768), Tile(128, 128, 32, 16, 128, stages=3), True),
    # a tile that is not square splits w in the pass: reading its 4 GB costs more than the GEMM saves
    ((128, 32768, 32768), Tile(64, 128, 32, 16, 128, stages=4), False)])
def test_the_cost_model_counts_the_split(shape, tile, kept):
    """The split pass reads and writes x's M K elements, and reads w's N K (its split kept from
    call to call; none where the GEMM splits w itself): at 128 x 32768 -> 32768 (w 4 GB) the pass
    over w costs more than the GEMM saves, and the search does not build a variant that makes it;
    at 1024 x 8192 -> 8192, and with w split in registers at 128 rows, fp16x3 is predicted the
    fastest fp32-accurate GEMM."""
    fp16x3, tf32x3 = spec(*shape).replace(tile=tile), spec(*shape, math="tf32x3").replace(
        tile=Tile(128, 128, 32, 16, 128, stages=4))
    faster = predicted_ms(fp16x3, 132) < predicted_ms(tf32x3, 132)
    assert faster == kept
    # Among the shape's candidates (the square tile that splits w in registers among them):
    # the variant is built where it is predicted to win, and tf32x3's best always (the fallback).
    others = [spec(*shape).replace(tile=TILE), tf32x3]
    dropped = prune([fp16x3, *others], {1e-4: {"tf32x3", "fp16x3", "fp32_simt"}}, 132)
    assert (fp16x3 not in dropped) == kept and tf32x3 not in dropped


def test_the_gemm_splits_w_in_registers_up_to_the_specs_batch():
    """The batch up to which a square tile splits w in registers is spec's constant, handed to
    the kernel as its template argument (one place for the number; what the kernel makes of it,
    square tiles only, tests/test_compile.py's mirror test asserts at compile time), and the
    header says so where the tile is square."""
    assert generator.gemm_type(spec(), 8192).endswith(f", {FP16X3_W_IN_REGISTERS_MAX_ROWS}>")
    assert "split in the GEMM's registers" in " ".join(generator.describe_variant(spec()))
    other = spec().replace(tile=Tile(64, 128, 32, 16, 128, stages=4))
    assert "split in the GEMM's registers" not in " ".join(generator.describe_variant(other))


@pytest.mark.gpu
@pytest.mark.parametrize("ref, batch, shape", [
    ("gemm_mul_leakyrelu", 1000, []), ("gemm_swish_scale", 1000, []), ("gemm_sigmoid_gemm_lse", 1000, []),
    ("gemm_mul_leakyrelu", 1000, ["--in", "8200", "--out", "512"]),
    # At most FP16X3_W_IN_REGISTERS_MAX_ROWS rows: w split in the GEMM's registers. (The chained
    # GEMMs at 200 rows failed the training check, tf32x3's file as fp16x3's, until every fp32
    # run took each step from the fp64 run's parameters: validate._training_run.)
    ("gemm_mul_leakyrelu", 250, []), ("gemm_swish_scale", 250, ["--in", "8200", "--out", "1000"]),
    ("gemm_sigmoid_gemm_lse", 200, []),
    # K = 1000 and 2040: x's rows short enough for a warp each (f16x3_split_short_rows_kernel,
    # 8 and 16 quads a lane), the last lanes' quads past K.
    ("gemm_mul_leakyrelu", 1000, ["--in", "1000", "--out", "512"]),
    ("gemm_mul_leakyrelu", 1000, ["--in", "2040", "--out", "512"]),
    # Outputs no wider than a tile: x split in the GEMM's registers (x_in_registers), w's kept
    # split beside it; N = 100 not a multiple of 8; K = 8192 at 1000 rows splits K 8 ways; the
    # second of two chained GEMMs narrow.
    ("gemm_mul_leakyrelu", 1000, ["--in", "1024", "--out", "16"]),
    ("gemm_swish_scale", 1000, ["--in", "2048", "--out", "100"]),
    ("gemm_mul_leakyrelu", 1000, ["--in", "8192", "--out", "32"]),
    ("gemm_sigmoid_gemm_lse", 1000, ["--out", "24"])])
def test_fp16x3_files_pass_the_gate_in_training_too(tmp_path, ref, batch, shape):
    """Point-wise modules (their training forward keeps z for the backward: entry_backward.cuh,
    which must hand the GEMM its workspace as the eval forward does) and two chained GEMMs (the
    second's K is the first's width), fp16x3 at an odd batch: every check of the gate (NaN, Inf
    and magnitudes among them). K = 8200: rows longer than the split kernel holds in registers
    (kHeldQuads), read twice, and a last k-tile w's boxes cover in part. Batches of at most
    FP16X3_W_IN_REGISTERS_MAX_ROWS rows split w in the GEMM's registers, 1000 in the pass."""
    import torch

    from conftest import REFS_DIR
    from kgen.check.loading import EmittedFile
    from kgen.check.validate import validate

    if not (torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)):
        pytest.skip("fp16x3 runs on kgen's Hopper GEMM")
    out = tmp_path / f"{ref}.py"
    r = CliRunner().invoke(main, ["generate", str(REFS_DIR / f"{ref}.py"), "--math", "fp16x3", "--batch", str(batch), *shape,
                                  "-o", str(out), "--results-dir", str(tmp_path / "results")])
    assert r.exit_code == 0, r.output
    results = validate(EmittedFile(out), tol=1e-4)
    failed = [x.line() for x in results if not x.passed]
    assert not failed, "\n".join(failed)
