"""Session 60's probe (call A) of modules as ML engineers write them (CPU), generated over axes.

PLACEHOLDER
"""

import copy
import textwrap
import warnings

import pytest
import torch

from kgen.frontend.reference import Reference
from kgen.frontend.trace import rows_output, trace
from kgen.ir.autodiff import graph_vjp
from kgen.ir.graph import Unsupported

HEADER = "import math\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
R3 = (4, 5, 16)


def source(init: str, body: str, shape=(8, 16), sig="in_features, out_features", args="16, 16", prelude="",
           dtype=None) -> str:
    """A reference file: Model.__init__'s lines `init`, forward's lines `body` (x in, x out)."""
    dt = f", dtype=torch.{dtype}" if dtype else ""
    indent = lambda text: textwrap.indent(textwrap.dedent(text).strip("\n"), " " * 8)   # noqa: E731
    return (f"{HEADER}{prelude}\n\nclass Model(nn.Module):\n    def __init__(self, {sig}):\n        super().__init__()\n"
            f"{indent(init)}\n\n    def forward(self, x):\n{indent(body)}\n        return x\n\n\n"
            f"def get_inputs():\n    return [torch.randn({', '.join(map(str, shape))}{dt})]\n\n\n"
            f"def get_init_inputs():\n    return [{args}]\n")


def reference(tmp_path, text: str, name: str = "ref") -> Reference:
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    return Reference(path)


# ---- the fixes, each on its own ----------------------------------------------------------------
@pytest.mark.parametrize("body", ["B, S, D = x.shape\nx = self.fc(x.view(B * S, D)).view(B, S, -1)",
                                  "x = self.fc(x)\nb, s, _ = x.shape\nx = x.reshape(b, s, 4, -1).softmax(-1).reshape(b, s, -1)"])
def test_reading_a_3d_inputs_sizes_is_refused_saying_kgen_traced_its_rows(body, tmp_path):
    """kgen traces a (..., K) input's module on its rows, a 2-d tensor the user never wrote: the
    refusal said "not enough values to unpack (expected 3, got 2)" or "the size index 2 of a 2-d
    shape" of a 3-d tensor, and nothing of the rows."""
    ref = reference(tmp_path, source("self.fc = nn.Linear(in_features, out_features)", body, R3))
    with pytest.raises(Unsupported, match=r"kgen traces the forward on its rows, x\.reshape\(-1, 16\), a 2-d tensor"):
        trace(ref)
