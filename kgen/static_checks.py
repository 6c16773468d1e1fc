"""Static rules every emitted file obeys (DESIGN.md section 2), checked on its text alone:
KernelBench rejects try/except and pass, and loads files with exec, so nothing may depend on
__file__, relative imports or files beside it."""

from __future__ import annotations

import ast
import sys

ALLOWED_TOP_MODULES = {"torch"} | set(sys.stdlib_module_names)
FORBIDDEN_NAMES = {"__file__": "__file__ does not exist when the file is exec'd",
                   "open": "the file must not read files beside it",
                   "setattr": "no monkey-patching",
                   "threading": "no extra threads", "Stream": "no extra streams"}


def violations(source: str) -> list[str]:
    """Every broken rule, with its line; an empty list means the file passes."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        return [f"line {e.lineno}: does not parse: {e.msg}"]
    problems = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", "?")
        if isinstance(node, (ast.Try, ast.ExceptHandler)) or type(node).__name__ == "TryStar":
            problems.append(f"line {line}: try/except is not allowed")
        elif isinstance(node, ast.Pass):
            problems.append(f"line {line}: pass is not allowed")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                problems.append(f"line {line}: relative import")
            elif (node.module or "").split(".")[0] not in ALLOWED_TOP_MODULES:
                problems.append(f"line {line}: imports {node.module}; only torch and the standard library")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] not in ALLOWED_TOP_MODULES:
                    problems.append(f"line {line}: imports {alias.name}; only torch and the standard library")
        elif isinstance(node, (ast.Name, ast.Attribute)):
            name = node.id if isinstance(node, ast.Name) else node.attr
            if name in FORBIDDEN_NAMES:
                problems.append(f"line {line}: uses {name}: {FORBIDDEN_NAMES[name]}")
    classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    if "ModelNew" not in classes:
        problems.append("defines no class ModelNew")
    calls_at_import = [n for n in tree.body if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call)]
    for n in calls_at_import:
        problems.append(f"line {n.lineno}: runs a call at import (nothing may compile or run at import)")
    return problems
