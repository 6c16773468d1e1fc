"""Python source text as kgen reads it: parsed once per text.

`kgen generate` parses the file it renders to check its module-level names
(codegen.generator._check_names_apart), then again for the static rules (check.static_checks);
an emitted file is ~240 KB, some 15 ms a parse. The trees are shared: callers only read them.
"""

from __future__ import annotations

import ast
import functools


@functools.lru_cache(maxsize=16)
def parsed(source: str) -> ast.Module:
    """ast.parse(source), the same tree for the same text (do not modify it)."""
    return ast.parse(source)
