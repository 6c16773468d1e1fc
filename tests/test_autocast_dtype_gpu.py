"""The dtype eager gives a module's output under CUDA's torch.autocast, and kgen's reading of it.

An emitted file runs its module inside torch.autocast as eager's Linear does (an fp32 module's
GEMM in autocast's 16-bit dtype) and hands its output over in the dtype eager's ops give it
there: the autocast dtype, or fp32 after an op of autocast's fp32 list (exp, softmax, a sum,
GroupNorm, ...) or one that meets an fp32 tensor (a parameter of an fp32 module, the fp32
input). kgen reads that from the forward's torch calls (kgen.frontend.autocast;
Graph.autocast_output). Here eager itself is the judge, on a CUDA device (autocast's lists are
CUDA's): every module of tests/refs, every KernelBench level-2 file as published, and every
spelling of tests/test_styles.py (nn.Linear against `x @ W.t() + b`, whose bias add is fp32
there, ops as modules, functions, methods and operators), each module in fp32 and in 16 bits,
given an fp32 input and a 16-bit one. No kernels are built: these are the reference modules
alone."""

from pathlib import Path

import pytest
import torch

from kgen.frontend.autocast import output_is_fp32
from kgen.frontend.reference import Reference
from kgen.frontend.trace import trace

from conftest import SYNTHESIZED_REFS
from test_ir import SMALL
from test_kernelbench_corpus import FILES as KERNELBENCH_FILES
from test_styles import SPELLINGS, write

pytestmark = pytest.mark.gpu
CUDA = torch.cuda.is_available()


def check_output_dtype(ref: Reference, dtype: torch.dtype):
    """The module in fp32 and in `dtype`, given an fp32 input and a 16-bit one, inside autocast."""
    graph = trace(ref)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = ref.Model(*ref.init_args())
    model.eval()   # (dropout's identity: the dtypes are the same in training mode)
    x = ref.inputs()[0].cuda()
    for module in (torch.float32, dtype):
        model.to(module)
        for given in (torch.float32, dtype):
            with torch.no_grad(), torch.autocast("cuda", dtype=dtype):
                out = model(x.to(given))
            assert out.dtype in (torch.float32, dtype), out.dtype
            reading = output_is_fp32(graph.autocast_output, given == torch.float32, module == torch.float32)
            assert reading == (out.dtype == torch.float32), \
                (f"{module} module, {given} input: eager's output is {out.dtype}, kgen reads "
                 f"{'fp32' if reading else dtype} ({graph.autocast_output})")


@pytest.mark.skipif(not CUDA, reason="torch.autocast's op lists are CUDA's")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("ref", [str(p) for p in SYNTHESIZED_REFS], ids=lambda r: Path(r).stem)
def test_refs(ref, dtype):
    check_output_dtype(Reference(ref, SMALL), dtype)


@pytest.mark.skipif(not CUDA, reason="torch.autocast's op lists are CUDA's")
@pytest.mark.skipif(not KERNELBENCH_FILES, reason="../shared/kernelbench is absent")
@pytest.mark.parametrize("ref", KERNELBENCH_FILES, ids=lambda p: p.name.split("_")[0])
def test_kernelbench_files(ref):
    check_output_dtype(Reference(str(ref), SMALL), torch.bfloat16)


@pytest.mark.skipif(not CUDA, reason="torch.autocast's op lists are CUDA's")
@pytest.mark.parametrize("spelling", SPELLINGS, ids=lambda s: s.id())
def test_spellings(spelling, tmp_path):
    check_output_dtype(Reference(write(tmp_path, spelling)), torch.bfloat16)
