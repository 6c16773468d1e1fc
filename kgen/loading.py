"""Loading emitted files the way KernelBench does: exec of the source text, no import path."""

from __future__ import annotations

import types
from pathlib import Path

from .problems import get_problem
from .spec import Spec


class EmittedFile:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"no such file: {self.path}")
        self.source = self.path.read_text()
        self.module = types.ModuleType(f"kgen_emitted_{self.path.stem}")
        exec(compile(self.source, str(self.path), "exec"), self.module.__dict__)
        if "KGEN_SPEC" not in self.module.__dict__ or "ModelNew" not in self.module.__dict__:
            raise ValueError(f"{self.path} is not a kgen file (no KGEN_SPEC / ModelNew)")
        self.spec = Spec.from_dict(self.module.KGEN_SPEC)
        self.problem = get_problem(self.spec.problem)
        self.ModelNew = self.module.ModelNew
        self.Model = self.problem.reference_model_class()

    def init_args(self) -> tuple:
        return self.problem.init_args(self.spec.in_features, self.spec.out_features)

    def build(self):
        return self.module.build()
