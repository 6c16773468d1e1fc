from pathlib import Path

import pytest
import torch

REFS_DIR = Path(__file__).resolve().parent / "refs"
# References of tests/refs/ that kgen refuses, with a word the refusal names.
REFUSED_REFS = {"conv2d_relu": "Conv2d", "gemm_cumsum": "cumsum", "gemm_sigmoid_gemm_lse": "second GEMM"}
# The modules kgen synthesizes.
SYNTHESIZED_REFS = sorted(p.resolve() for p in REFS_DIR.glob("*.py") if p.stem not in REFUSED_REFS)


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU; run `pytest -m gpu` on a GPU machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
