"""Reference modules in the KernelBench convention: a Python file defining `Model`,
`get_inputs()`, `get_init_inputs()` and module-level constants (batch_size, in_features, ...).

kgen executes the file (it is the user's own code, as KernelBench runs it), builds the model on
the meta device to read shapes without allocating, and keeps the text and its hash so that an
emitted file can name exactly what it was generated from and checked against.
"""

from __future__ import annotations

import ast
import hashlib
import textwrap
import types
from pathlib import Path

import torch

SHIPPED_DIR = Path(__file__).parent / "refs"
SHIPPED_PREFIX = "kgen:"   # "kgen:NAME" names kgen/refs/NAME.py, the references shipped with kgen
# Module-level constants that --batch, --in and --out override (KernelBench's names).
SHAPE_CONSTANTS = {"batch": "batch_size", "in_features": "in_features", "out_features": "out_features"}


class ReferenceError(ValueError):
    """A reference file that cannot be used; the message says why."""


def shipped_names() -> list[str]:
    return sorted(p.stem for p in SHIPPED_DIR.glob("*.py"))


def resolve(name_or_path: str) -> Path:
    if name_or_path.startswith(SHIPPED_PREFIX):
        path = SHIPPED_DIR / f"{name_or_path[len(SHIPPED_PREFIX):]}.py"
        if not path.is_file():
            raise ReferenceError(f"no shipped reference {name_or_path!r}; shipped: "
                                 f"{', '.join(SHIPPED_PREFIX + n for n in shipped_names())}")
        return path
    return Path(name_or_path)


def reference_id(path: Path) -> str:
    """How a spec names its reference: kgen:NAME for a shipped one, else the path as given."""
    try:
        shipped = path.resolve().parent == SHIPPED_DIR.resolve()
    except OSError:
        shipped = False
    return SHIPPED_PREFIX + path.stem if shipped else str(path)


class Reference:
    def __init__(self, ref: str | Path, overrides: dict | None = None):
        """`ref`: a path, or kgen:NAME. `overrides`: values for the module's shape constants
        (keys batch, in_features, out_features), applied before get_inputs / get_init_inputs."""
        self.id = ref if isinstance(ref, str) and ref.startswith(SHIPPED_PREFIX) else None
        self.path = resolve(str(ref))
        if self.id is None:
            self.id = reference_id(self.path)
        if not self.path.is_file():
            raise ReferenceError(f"no such reference file: {self.path}")
        try:
            self.source = self.path.read_text()
        except (OSError, UnicodeDecodeError) as e:
            raise ReferenceError(f"cannot read {self.path}: {e}") from None
        self.sha256 = hashlib.sha256(self.source.encode()).hexdigest()
        self.name = self.path.stem
        self.module = types.ModuleType(f"kgen_reference_{self.name}")
        self.module.__dict__["__file__"] = str(self.path)
        try:
            exec(compile(self.source, str(self.path), "exec"), self.module.__dict__)
        except Exception as e:  # noqa: BLE001 - the user's file failing is a message
            raise ReferenceError(f"{self.path} raised {type(e).__name__} when executed: {e}") from None
        for name in ("Model", "get_inputs", "get_init_inputs"):
            if name not in self.module.__dict__:
                raise ReferenceError(f"{self.path} defines no {name} (KernelBench convention: Model, "
                                     "get_inputs(), get_init_inputs())")
        self.Model = self.module.Model
        for key, value in (overrides or {}).items():
            if value is None:
                continue
            constant = SHAPE_CONSTANTS[key]
            if constant not in self.module.__dict__:
                raise ReferenceError(f"{self.path} has no module-level {constant} for --{key.replace('_features', '')} "
                                     "to override")
            self.module.__dict__[constant] = value
        with torch.device("meta"):
            inputs = self.module.get_inputs()
            self._init_args = list(self.module.get_init_inputs())
        tensors = [t for t in inputs if isinstance(t, torch.Tensor)]
        if len(inputs) != 1 or len(tensors) != 1:
            raise ReferenceError(f"{self.path}: get_inputs() returns {len(inputs)} values; kgen "
                                 "synthesizes modules of one input tensor")
        # The input's rank and dtype are checked by the tracer, after it has named the first op
        # (a Conv2d on a 4-D input is refused as a Conv2d).
        (self.input,) = tensors
        for a in self._init_args:
            if isinstance(a, torch.Tensor):
                raise ReferenceError(f"{self.path}: get_init_inputs() returns a tensor; kgen needs "
                                     "plain values it can write into the emitted file")

    def init_args(self) -> list:
        return list(self._init_args)

    def constants(self) -> dict:
        """The module's shape constants as the emitted file restates them."""
        return {c: self.module.__dict__[c] for c in SHAPE_CONSTANTS.values() if c in self.module.__dict__}

    def meta_model(self) -> torch.nn.Module:
        with torch.device("meta"):
            return self.Model(*self._init_args)

    def init_source(self) -> str:
        """Model.__init__ exactly as the reference writes it, for ModelNew to reuse verbatim:
        identical construction is what makes state_dicts and seeded parameters match."""
        tree = ast.parse(self.source)
        models = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"]
        inits = [n for n in (models[0].body if models else [])
                 if isinstance(n, ast.FunctionDef) and n.name == "__init__"]
        if not inits:
            raise ReferenceError(f"{self.path}: Model has no __init__ written in the file")
        return textwrap.dedent(ast.get_source_segment(self.source, inits[0], padded=True))

    def docstring(self) -> str:
        return (self.Model.__doc__ or "").strip().splitlines()[0] if self.Model.__doc__ else ""
