"""The problems kgen synthesizes: a reference module in the KernelBench convention, named either
by a path (`kgen generate REF.py`) or by the name of a reference shipped in kgen/refs/
(`--problem gemm_scale_bn`). Both go through the same path: load (kgen.reference), trace
(kgen.trace), lower (kgen.lower).

A spec's `problem` is the shipped name or the reference file's absolute path; its shape
(batch, in_features, out_features) sets the reference's module-level constants.
"""

from __future__ import annotations

import functools
from pathlib import Path

from .ir import Graph, Unsupported
from .reference import SHIPPED_PREFIX, Reference, ReferenceError, shipped_names
from .trace import trace

PROBLEMS = tuple(shipped_names())


def is_path(problem: str) -> bool:
    return problem.endswith(".py") or "/" in problem


def problem_id(problem: str) -> str:
    """The spec's name for a problem: a shipped name as is, a path made absolute."""
    if is_path(problem):
        return str(Path(problem).resolve())
    if problem not in PROBLEMS:
        raise ReferenceError(f"unknown problem {problem!r}; shipped: {', '.join(PROBLEMS)} "
                             "(or give the path of a reference file)")
    return problem


def problem_name(problem: str) -> str:
    """The short name files and records use: the reference file's stem."""
    return Path(problem).stem if is_path(problem) else problem


@functools.lru_cache(maxsize=64)
def load(problem: str, batch: int | None = None, in_features: int | None = None,
         out_features: int | None = None) -> Reference:
    ref = Reference(problem if is_path(problem) else SHIPPED_PREFIX + problem,
                    {"batch": batch, "in_features": in_features, "out_features": out_features})
    for what, want, got in (("batch", batch, ref.input.shape[0]), ("in_features", in_features,
                                                                   ref.input.shape[-1])):
        if want is not None and want != got:
            raise ReferenceError(f"{ref.path}: get_inputs() gives {what} {got}, not {want} (the file "
                                 f"has no module-level {'batch_size' if what == 'batch' else what} to set)")
    return ref


@functools.lru_cache(maxsize=64)
def graph(problem: str, batch: int | None = None, in_features: int | None = None,
          out_features: int | None = None) -> Graph:
    g = trace(load(problem, batch, in_features, out_features))
    if out_features is not None and g.out_features != out_features:
        raise Unsupported(f"{problem}: the GEMM has {g.out_features} output features, not {out_features} "
                          "(the reference has no module-level out_features to set)")
    return g


def default_shape(problem: str) -> tuple[int, int, int]:
    """(batch, in_features, out_features) as the reference file defines them."""
    ref = load(problem)
    g = graph(problem)
    return int(ref.input.shape[0]), int(ref.input.shape[-1]), g.out_features
