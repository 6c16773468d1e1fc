"""The reference problems: their PyTorch modules, shapes and how ModelNew mirrors them.

Each problem carries the source of its reference `Model` (written here, DESIGN.md section 1) so
that the same text is exec'd for validation and quoted in emitted files, and so a user can read
exactly what a generated kernel is checked against.
"""

from __future__ import annotations

import ast
import dataclasses
import textwrap
from typing import Callable

GEMM_SCALE_BN_SOURCE = '''\
import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear -> per-feature scale -> BatchNorm1d (KernelBench level 2, problems 33 and 39)."""

    def __init__(self, in_features, out_features, scale_shape, eps=1e-5, momentum=0.1):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.scale = nn.Parameter(torch.randn(scale_shape))
        self.bn = nn.BatchNorm1d(out_features, eps=eps, momentum=momentum)

    def forward(self, x):
        x = self.gemm(x)
        x = x * self.scale
        x = self.bn(x)
        return x
'''

GEMM_BN_SCALE_SOFTMAX_SOURCE = '''\
import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear -> BatchNorm1d -> scale -> Softmax (KernelBench level 2, problem 84)."""

    def __init__(self, in_features, out_features, bn_eps=1e-5, bn_momentum=0.1, scale_shape=(1,)):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.bn = nn.BatchNorm1d(out_features, eps=bn_eps, momentum=bn_momentum)
        self.scale = nn.Parameter(torch.ones(scale_shape))
        self.softmax = nn.Softmax(dim=1)

    def forward(self, x):
        x = self.gemm(x)
        x = self.bn(x)
        x = self.scale * x
        x = self.softmax(x)
        return x
'''


@dataclasses.dataclass(frozen=True)
class Problem:
    name: str
    title: str
    reference_source: str
    default_batch: int
    default_in: int
    default_out: int
    kernelbench: tuple[str, ...]  # KernelBench level-2 problem numbers at these defaults
    # The constructor arguments (positional, as KernelBench's get_init_inputs returns them).
    init_args: Callable[[int, int], tuple]

    def init_source(self) -> str:
        """Model.__init__ exactly as the reference writes it, for ModelNew to reuse verbatim:
        identical construction is what makes state_dicts and seeded parameters match."""
        tree = ast.parse(self.reference_source)
        (model,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"]
        (init,) = [n for n in model.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"]
        return textwrap.dedent(ast.get_source_segment(self.reference_source, init, padded=True))

    def reference_model_class(self):
        namespace: dict = {}
        exec(compile(self.reference_source, f"<kgen reference {self.name}>", "exec"), namespace)
        return namespace["Model"]


PROBLEMS: dict[str, Problem] = {
    p.name: p
    for p in (
        Problem(
            name="gemm_scale_bn",
            title="Linear -> per-feature scale -> BatchNorm1d",
            reference_source=GEMM_SCALE_BN_SOURCE,
            default_batch=1024,
            default_in=8192,
            default_out=8192,
            kernelbench=("33 (1024x8192x8192)", "39 (16384x4096x4096)"),
            init_args=lambda i, o: (i, o, (o,)),
        ),
        Problem(
            name="gemm_bn_scale_softmax",
            title="Linear -> BatchNorm1d -> scale -> Softmax",
            reference_source=GEMM_BN_SCALE_SOFTMAX_SOURCE,
            default_batch=1024,
            default_in=8192,
            default_out=8192,
            kernelbench=("84 (1024x8192x8192)",),
            init_args=lambda i, o: (i, o),
        ),
    )
}


def get_problem(name: str) -> Problem:
    if name not in PROBLEMS:
        raise ValueError(f"unknown problem {name!r}; known: {', '.join(sorted(PROBLEMS))}")
    return PROBLEMS[name]
