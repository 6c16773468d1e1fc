"""The problems kgen synthesizes: a reference module in the KernelBench convention, named either
by a path (`kgen generate REF.py`) or by the name of a reference shipped in kgen/refs/
(`--problem gemm_scale_bn`). Both go through the same path: load (kgen.frontend.reference), trace
(kgen.frontend.trace), lower (kgen.lower.forward).

A spec's `problem` is the shipped name or the reference file's absolute path; its shape
(batch, in_features, out_features) and `constants` set the reference's workload
(kgen.frontend.reference maps each onto the module-level constant that sets it).
"""

from __future__ import annotations

import functools
from pathlib import Path

from kgen.ir.graph import Graph, Unsupported
from kgen.frontend.reference import SHIPPED_PREFIX, Reference, ReferenceError, shipped_names
from kgen.frontend.trace import trace

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
         out_features: int | None = None, constants: tuple = ()) -> Reference:
    """The reference with the workload asked for: `constants` ((name, value) pairs, --set)
    first, then batch / in_features / out_features mapped onto the constants that set them."""
    return Reference(problem if is_path(problem) else SHIPPED_PREFIX + problem,
                     {"batch": batch, "in_features": in_features, "out_features": out_features},
                     dict(constants))


@functools.lru_cache(maxsize=64)
def graph(problem: str, batch: int | None = None, in_features: int | None = None,
          out_features: int | None = None, constants: tuple = ()) -> Graph:
    g = trace(load(problem, batch, in_features, out_features, constants))
    if out_features is not None and g.out_features != out_features:
        raise Unsupported(f"{problem}: the last GEMM has {g.out_features} output features, not "
                          f"{out_features}")
    return g


def default_shape(problem: str, constants: tuple = ()) -> tuple[int, int, int]:
    """(batch, in_features, out_features) as the reference file defines them."""
    ref = load(problem, constants=constants)
    g = graph(problem, constants=constants)
    return int(ref.input.shape[0]), int(ref.input.shape[-1]), g.out_features
