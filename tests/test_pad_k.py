"""A module whose in_features is no multiple of 8 (16-bit) or 4 (fp32): kgen's Hopper GEMMs read x
and w by TMA in whole 16-byte rows, so the C entry copies them into the workspace with zero columns
to a multiple of 8 and runs the GEMM at that K (kgen/codegen/kernels/entry.cuh's gemm_k,
pad_k.cuh's pad_k).
Here on the CPU: the emitted file hands the entry x, w and K as the module's (no torch op pads
them: those were host time on every call), entry.cuh's rule and pad_k.cuh's copy compiled for the host with g++
against torch's zero pad and kgen/tune/configs.py's gemm_k (the tuner's copy of the rule), and the
CUDA source's switch per family. The GPU side, the full gate at such widths, is test_gpu.py's and
test_half_gpu.py's ragged tests."""

import re
import subprocess
from pathlib import Path

import pytest
import torch

from kgen.check.loading import EmittedFile
from kgen.codegen import generator
from kgen.codegen.generator import CODEGEN_DIR
from kgen.tune import configs
from kgen.tune.spec import Spec, Tile

import host_builds
from conftest import launch_on_cpu

REF = str(Path(__file__).parent / "refs" / "gemm_swish_scale.py")
ENTRY = (CODEGEN_DIR / "kernels" / "entry.cuh").read_text()
PAD = (CODEGEN_DIR / "kernels" / "pad_k.cuh").read_text()
KS = [0, 1, 3, 4, 7, 8, 9, 12, 15, 16, 17, 300, 301, 302, 1337, 1340, 4096]


def _between(text: str, first: str, last: str) -> str:
    start = text.index(first)
    return text[start:text.index(last, start) + len(last)]


# entry.cuh's rule and pad_k.cuh's element copy, as written there (the launcher, CUDA's <<<>>>, left out).
RULE = _between(ENTRY, "constexpr bool kPadsK", "K + 8 - K % 8 : K;\n}\n")
COPY = _between(PAD, "template <class XWord, class WWord>\n__host__ __device__", "\n  }\n}\n")

HARNESS = r"""
#include <cstdio>
#include <cstdlib>
#include <type_traits>
#define __host__
#define __device__
#define __forceinline__ inline
namespace kgen_cfg { constexpr bool kPadsK = PADS; }
namespace kgen {
constexpr bool kOwnGemm = true;
using Operand = ELEM;
@RULE@
@COPY@
}
// argv: "k" prints gemm_k of K = 0..4096; "pad K rows_x rows_w" prints the copies of x[i] = i + 1
// and w[i] = 100000 + i as gemm_k pads them, one value per line.
int main(int argc, char** argv) {
  if (argv[1][0] == 'k') {
    for (int K = 0; K <= 4096; ++K) std::printf("%d\n", kgen::gemm_k(K));
    return 0;
  }
  const int K = std::atoi(argv[2]), rows_x = std::atoi(argv[3]), rows_w = std::atoi(argv[4]);
  const int k = kgen::gemm_k(K);
  ELEM* x = new ELEM[rows_x * K + 1];
  unsigned* w = new unsigned[rows_w * K + 1];
  for (int i = 0; i < rows_x * K; ++i) x[i] = static_cast<ELEM>(i + 1);
  for (int i = 0; i < rows_w * K; ++i) w[i] = 100000u + i;
  ELEM* px = new ELEM[rows_x * k];
  unsigned* pw = new unsigned[rows_w * k];
  for (long long row = 0; row < rows_x + rows_w; ++row)
    for (int col = 0; col < k; ++col) kgen::pad_k_element(row, col, x, w, px, pw, rows_x, K, k);
  for (int i = 0; i < rows_x * k; ++i) std::printf("%u\n", static_cast<unsigned>(px[i]));
  for (int i = 0; i < rows_w * k; ++i) std::printf("%u\n", pw[i]);
  return 0;
}
"""
# The builds: fp32 operands (Operand 4 bytes), 16-bit ones (2 bytes: x's words; w's are 4 bytes,
# as the build for torch.autocast's fp32 weight beside 16-bit x), and a GEMM that needs no pad.
BUILDS = {"fp32": ("true", "unsigned"), "16-bit": ("true", "unsigned short"), "no pad": ("false", "unsigned")}


@pytest.fixture(scope="module")
def binaries(tmp_path_factory):
    if host_builds.GXX is None:
        pytest.skip("g++ not on PATH")
    folder = tmp_path_factory.mktemp("pad_k")
    out = {}
    for name, (pads, elem) in BUILDS.items():
        source = folder / f"{name.replace(' ', '_')}.cpp"
        source.write_text(HARNESS.replace("@RULE@", RULE).replace("@COPY@", COPY)
                          .replace("PADS", pads).replace("ELEM", elem))
        built = host_builds.build(source, source.with_suffix(""))
        assert built.returncode == 0, built.stderr
        out[name] = source.with_suffix("")
    return out


def run(binary, *args) -> list[int]:
    done = subprocess.run([str(binary), *map(str, args)], capture_output=True, text=True, timeout=60, check=True)
    return [int(v) for v in done.stdout.split()]


@pytest.mark.parametrize("build, element_bytes", [("fp32", 4), ("16-bit", 2)])
def test_the_entrys_rule_is_the_tuners(binaries, build, element_bytes):
    """gemm_k for every K to 4096: the tuner's (configs.gemm_k, which sizes its split-K) is the
    entry's; a K on 16-byte rows is kept, others go to the next multiple of 8, K = 0 to 8."""
    entry = run(binaries[build], "k")
    assert entry == [configs.gemm_k(K, element_bytes) for K in range(4097)]
    row = 16 // element_bytes
    assert all(k == K for K, k in enumerate(entry) if K and K % row == 0)
    assert all(k % 8 == 0 and K < k <= K + 8 for K, k in enumerate(entry) if K % row or K == 0)


def test_a_gemm_that_reads_no_tma_keeps_its_k(binaries):
    assert run(binaries["no pad"], "k") == list(range(4097))


@pytest.mark.parametrize("build", ["fp32", "16-bit"])
@pytest.mark.parametrize("K", [0, 1, 7, 9, 301, 302])
def test_the_copies_are_torchs_zero_pad(binaries, build, K):
    """The copies of x and w (3 and 5 rows) are the rows padded with zeros to gemm_k's K, bit for
    bit, each in its own word size."""
    rows_x, rows_w = 3, 5
    k = configs.gemm_k(K, 4 if build == "fp32" else 2)
    values = run(binaries[build], "pad", K, rows_x, rows_w)
    x = torch.arange(1, rows_x * K + 1, dtype=torch.int64).reshape(rows_x, K)
    w = torch.arange(100000, 100000 + rows_w * K, dtype=torch.int64).reshape(rows_w, K)
    expected = torch.cat([torch.constant_pad_nd(x, (0, k - K)).flatten(), torch.constant_pad_nd(w, (0, k - K)).flatten()])
    assert values == expected.tolist()


@pytest.fixture(scope="module")
def emitted(tmp_path_factory):
    spec = Spec.of(REF, 64, 300, 96, math="tf32x3", backend="wgmma", fusion=1, tile=Tile(128, 128, 32, 16, 128, stages=4))
    return EmittedFile(generator.write(spec, tmp_path_factory.mktemp("pad") / f"{spec.name()}.py"))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=["fp32", "bf16", "fp16"])
@pytest.mark.parametrize("in_features", [300, 301, 302, 7, 0])
def test_the_file_hands_the_entry_the_modules_x_w_and_k(emitted, monkeypatch, dtype, in_features):
    """Part 0's body (its _kgen_launch) on CPU tensors against a stand-in library: the entry gets
    x's and w's own memory and K as the module has it, whatever K, and the file holds no pad of
    its own."""
    m = emitted.module
    library = launch_on_cpu(m, monkeypatch)
    x = torch.randn(64, in_features).to(dtype)
    w = torch.randn(96, in_features).to(dtype)
    m._KGEN_IMPLS[0](x, w, training=0, operand0=torch.randn(96).to(dtype), autocast=0, keep_z=0)   # (the Linear's bias; no autocast)
    (call,) = library.calls
    assert (call["M"], call["N"], call["K"]) == (64, 96, in_features)
    assert call["x"] == x.data_ptr() and call["w"] == w.data_ptr()
    assert "constant_pad_nd" not in emitted.path.read_text()


@pytest.mark.parametrize("backend, pads", [("wgmma", True), ("kgen", False), ("cublas", False)])
def test_the_switch_is_on_for_the_hopper_family_alone(backend, pads):
    """kgen_cfg::kPadsK: the wgmma family's GEMMs read by TMA (fp32 and 16-bit builds); kgen's
    mma.sync GEMM and cuBLAS take any K, and their files hold no pad code. Every part's forward
    entry of a wgmma file pads before it runs."""
    math = "tf32x3" if backend != "cublas" else "tf32"
    tile = None if backend == "cublas" else Tile(128, 128, 32, 16, 128, stages=4) if backend == "wgmma" else Tile(128, 128, 32, 64, 32, stages=4)
    spec = Spec.of(REF, 64, 301, 96, math=math, backend=backend, fusion=1, tile=tile)
    source = generator.render_cuda_source(spec)
    assert f"constexpr bool kPadsK = {'true' if pads else 'false'};" in source
    entries = re.findall(r"KGEN_EXPORT const char\* kgen_forward_\d+\(.*?\n}\n", source, re.S)
    assert entries and all(("kgen::pad_k(a)" in e) == pads for e in entries)
    assert ("pad_k_kernel" in source) == pads
