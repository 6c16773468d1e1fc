"""Loading emitted files the way KernelBench does: exec of the source text, no import path."""

from __future__ import annotations

import types
from pathlib import Path

from .reference import Reference, ReferenceError
from .spec import Spec, SpecError
from .static_checks import check_emitted


class EmittedFile:
    def __init__(self, path: str | Path, ref: str | Path | None = None):
        """`ref`: the reference file to check against [the one the file names]."""
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"no such file: {self.path}")
        try:
            self.source = self.path.read_text()
        except (OSError, UnicodeDecodeError) as e:
            raise ValueError(f"cannot read {self.path}: {e}") from None
        # Read before it runs: a file that does not parse, breaks the static rules or is not a
        # kgen file is refused without executing any of it.
        broken = check_emitted(self.source)
        if broken:
            raise ValueError(f"{self.path} breaks the static rules of emitted files: "
                             + "; ".join(broken[:3]))
        if "KGEN_SPEC = " not in self.source:
            raise ValueError(f"{self.path} is not a kgen file (no KGEN_SPEC)")
        self.module = types.ModuleType(f"kgen_emitted_{self.path.stem}")
        try:
            exec(compile(self.source, str(self.path), "exec"), self.module.__dict__)
        except Exception as e:  # noqa: BLE001 - the user's file failing is a message, not a crash
            raise ValueError(f"{self.path} raised {type(e).__name__} when executed: {e}") from None
        if "KGEN_SPEC" not in self.module.__dict__ or "ModelNew" not in self.module.__dict__:
            raise ValueError(f"{self.path} is not a kgen file (no KGEN_SPEC / ModelNew)")
        try:
            self.spec = Spec.from_dict(self.module.KGEN_SPEC)
        except (SpecError, TypeError) as e:
            raise ValueError(f"{self.path}: its KGEN_SPEC is not one this kgen makes: {e}") from None
        try:
            if ref is None:
                self.reference = self.spec.reference()
            else:
                self.reference = Reference(ref, {"batch": self.spec.batch, "in_features": self.spec.in_features,
                                                 "out_features": self.spec.out_features})
        except (ReferenceError, OSError) as e:
            raise ValueError(f"{self.path}: cannot load its reference: {e}") from None
        # A reference edited since the file was generated is still the yardstick (the user may
        # mean exactly that), but say so.
        self.reference_changed = (getattr(self.module, "KGEN_REFERENCE_SHA256", None)
                                   not in (None, self.reference.sha256))
        self.ModelNew = self.module.ModelNew
        self.Model = self.reference.Model
        self.has_batchnorm = any(part.batchnorms for part in self.spec.graph().parts) if ref is None else any(
            "BatchNorm" in type(m).__name__ for m in self.reference.meta_model().modules())
        # A module with an active Dropout runs in eval mode only (its forward refuses training
        # mode): checks and timings use eval mode for it.
        self.dropouts = self.spec.graph().dropouts
        self.runs_in_training = not self.dropouts

    def init_args(self) -> tuple:
        return tuple(self.reference.init_args())

    def build(self):
        return self.module.build()
