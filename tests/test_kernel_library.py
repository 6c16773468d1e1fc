"""Which kernel code an emitted file inlines (generator.KERNEL_LIBRARY): only what its variant
uses. Each test names what a variant's CUDA must hold and must not, by the definitions the
library's files make, so that pasting every file into every file again fails here."""

from pathlib import Path

import pytest

from kgen.codegen import generator
from kgen.tune.search import enumerate_specs

REFS = Path(__file__).resolve().parent / "refs"

# What each kind of kernel code defines: its presence in a file's CUDA.
DEFINES = {
    "simt": "struct SimtGemm {",
    "mma.sync GEMM": "struct MmaGemm {",
    "mma.sync helpers": "namespace mma_detail {",
    "wgmma": "struct WgmmaGemm {",
    "wgmma warp-specialized": "struct WgmmaWsGemm {",
    "wgmma 16-bit": "struct WgmmaWsHalfGemm {",
    "cuBLAS": "cublasGemmEx(",
    "backward": "backward_pointwise_kernel(",
    "backward entry": "forward_entry_with_backward(const",
    "gemv": "gemv_rows_kernel(",
    "gemv backward": "gemv_row_grad_kernel(",
    "constant": "constant_rows_kernel(",
    "constant fill": "fill_kernel(float* __restrict__ out, long long total, float value) {",
}


def _spec(ref: str, family: str, math: str | None = None):
    for s in enumerate_specs(str(REFS / f"{ref}.py"), 1024, 8192, 8192):
        if s.family == family and (math is None or s.math == math):
            return s
    raise LookupError((ref, family, math))


def _holds(spec) -> set[str]:
    source = generator.render_cuda_source(spec)
    return {kind for kind, text in DEFINES.items() if text in source}


# (reference, family, math): exactly the kinds of kernel code its file holds. gemm_swish_scale
# has point-wise backward kernels (on a cuBLAS variant too: its GEMMs on cuBLAS),
# gemm_sum_max_mean_lse the matrix-vector rewrite (its backward builds on backward.cuh's helpers
# and a broadcast tail's kernels, and instantiates none of its dz or GEMM code), gemm_max_sub_gelu
# a constant output.
CASES = [
    ("gemm_swish_scale", "cublas", None, {"cuBLAS", "backward", "backward entry"}),
    ("gemm_swish_scale", "simt", None, {"simt", "backward", "backward entry"}),
    ("gemm_swish_scale", "mma", "tf32x3", {"mma.sync GEMM", "mma.sync helpers", "backward", "backward entry"}),
    ("gemm_swish_scale", "wgmma", "tf32x3", {"mma.sync helpers", "wgmma", "wgmma warp-specialized", "wgmma 16-bit",
                                              "backward", "backward entry"}),
    ("gemm_sum_max_mean_lse", "gemv", None, {"gemv", "gemv backward", "backward", "backward entry"}),
    ("gemm_max_sub_gelu", "simt", None, {"simt", "constant", "constant fill"}),
]


@pytest.mark.parametrize("ref,family,math,expected", CASES, ids=lambda c: c if isinstance(c, str) else None)
def test_a_file_holds_only_the_kernel_code_its_variant_uses(ref, family, math, expected):
    assert _holds(_spec(ref, family, math)) == expected


def test_a_cublas_file_has_no_kgen_gemm_and_no_rewrite():
    """Its backward kernels call cuBLAS for dx and dW (CublasGemm), no GEMM of kgen's."""
    source = generator.render_cuda_source(_spec("gemm_bn_gelu_relu", "cublas"))
    for absent in ("wgmma_ws_kernel", "wgmma_gemm_kernel", "namespace mma_detail", "mma_gemm_kernel", "struct SimtGemm",
                   "weighted_column_sum_kernel", "constant_flag_kernel", DEFINES["constant fill"]):
        assert absent not in source, absent
    assert "using BackwardGemm = kgen::CublasGemm;" in source and "backward_rows_kernel(" in source


def test_a_part_without_backward_kernels_gets_no_backward_entry():
    """Per part of a chain: the forward entry point with backward only where the part has them."""
    from kgen.lower import backward

    spec = _spec("gemm_sigmoid_gemm_lse", "mma", "tf32x3")
    parts = generator.lowered_parts(spec)
    source = generator.render_cuda_source(spec)
    for k, low in enumerate(parts):
        has = backward.unsupported(low) is None
        entry = "forward_entry_with_backward" if has else "forward_entry"
        # (after the K pad where the part's GEMM reads by TMA: kernels/pad_k.cuh)
        assert f"return kgen_part{k}::kgen::{entry}(a);" in source
        assert (f"KGEN_EXPORT const char* kgen_backward_{k}(" in source) == has


def test_the_library_table_names_every_kernel_file_once_in_an_order_that_builds():
    files = [f.name for f in generator.KERNEL_LIBRARY + generator.PART_LIBRARY]
    assert sorted(files) == sorted(p.name for p in (generator.CODEGEN_DIR / "kernels").glob("*.cuh"))
    everything = generator.KernelNeeds("wgmma", half=True, backward=True, gemv=True, constant=True,
                                      eager_sums=True)
    library = generator.selected_files(generator.KERNEL_LIBRARY, everything)
    generator.selected_files(generator.PART_LIBRARY, everything, tuple(library))
    # A file whose prerequisite is left out is refused, not emitted.
    broken = (generator.LibraryFile("b.cuh", ("a.cuh",), lambda n: True),)
    with pytest.raises(AssertionError, match="a.cuh"):
        generator.selected_files(broken, everything)
