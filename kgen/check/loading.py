"""Loading emitted files the way KernelBench does: exec of the source text, no import path."""

from __future__ import annotations

import ast
import hashlib
import sys
import types
from pathlib import Path

import torch

from kgen.frontend.problems import is_path
from kgen.frontend.reference import Reference, ReferenceError, _restore_defaults, _torch_defaults, imports_beside
from kgen.tune.spec import Spec, SpecError
from kgen.check.static_checks import check_emitted


class NotAnEmittedFile(ValueError):
    """A file given where an emitted ModelNew file belongs (a usage error)."""


class EmittedFile:
    def __init__(self, path: str | Path, ref: str | Path | None = None, with_reference: bool = True):
        """`ref`: the reference file to check against [the one the file names]. Without
        `with_reference` only the file itself is read, checked and run (enough to build it): loading the
        reference traces it, whose first use of torch.fx costs a fresh process seconds (7 s of a
        candidate's 21 s build on an H100 host, docs/perf.md)."""
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"no such file: {self.path}")
        try:
            self.source = self.path.read_text()
        except (OSError, UnicodeDecodeError) as e:
            raise ValueError(f"cannot read {self.path}: {e}") from None
        # Read before it runs: a file that is not a kgen file, does not parse or breaks the
        # static rules is refused without executing any of it. Not being kgen's is said first:
        # the rules' complaints about a reference module would only mislead.
        if "KGEN_SPEC = " not in self.source:
            raise NotAnEmittedFile(not_emitted_message(self.path, self.source))
        broken = check_emitted(self.source)
        if broken:
            raise ValueError(f"{self.path} breaks the static rules of emitted files: "
                             + "; ".join(broken[:3]))
        # Registered as a module, as an import would register it: torch.compile (dynamo) looks
        # ModelNew's module up by name (measured: a DDP-wrapped model of two files failed with
        # "No module named kgen_emitted_..." on two H200s). One name per file path.
        name = f"kgen_emitted_{self.path.stem}_{hashlib.sha256(str(self.path.resolve()).encode()).hexdigest()[:8]}"
        self.module = types.ModuleType(name)
        self.module.__file__ = str(self.path)
        sys.modules[name] = self.module
        # torch's process-wide defaults, which the reference's text in the file may set
        # (torch.set_default_device("cuda")): put back after it, so that the checks' own tensors
        # (a CPU input that must be refused, a CPU generator's draws) are made where they say
        # (measured on an H200: two checks failed so), as Reference does for kgen's own.
        defaults = _torch_defaults()
        # The reference's text in it imports as a script does, from its folder: where that text
        # imports a module beside the reference (or beside this file), that folder is on the path
        # while it runs (the file itself, imported by the user's program, finds them on its path).
        text, folder = recorded_reference(self.source)
        try:
            with imports_beside(text, [self.path.resolve().parent, *([folder] if folder else [])]):
                exec(compile(self.source, str(self.path), "exec"), self.module.__dict__)
        except Exception as e:  # noqa: BLE001 - the user's file failing is a message, not a crash
            sys.modules.pop(name, None)
            raise ValueError(f"{self.path} raised {type(e).__name__} when executed: {e}") from None
        finally:
            _restore_defaults(*defaults)
        if "KGEN_SPEC" not in self.module.__dict__ or "ModelNew" not in self.module.__dict__:
            raise ValueError(f"{self.path} is not a kgen file (no KGEN_SPEC / ModelNew)")
        try:
            self.spec = Spec.from_dict(self.module.KGEN_SPEC)
        except (SpecError, TypeError) as e:
            raise ValueError(f"{self.path}: its KGEN_SPEC is not one this kgen makes: {e}") from None
        self.reference_embedded = False   # checked against the copy the file carries
        self.ModelNew = self.module.ModelNew
        if not with_reference:
            return
        if ref is None:
            self._follow_a_moved_reference()
        elif is_path(str(ref)) or Path(ref).is_file():
            # The reference named is the module this file stands for from here on (its graph
            # too: the one the file recorded may be gone); a file, whatever its name
            # (`model.txt` has neither `.py` nor a slash for is_path to see).
            self.spec = self.spec.replace(problem=str(Path(ref).resolve()))
        try:
            if ref is None:
                self.reference = self.spec.reference()
            else:
                self.reference = Reference(ref, {"batch": self.spec.batch, "in_features": self.spec.in_features,
                                                 "out_features": self.spec.out_features},
                                           dict(self.spec.constants))
        except (ReferenceError, OSError) as e:
            hint = "; if it moved, name it with --ref" if ref is None else ""
            # (a ReferenceError still: a reference kgen cannot use is the user's to mend, as generate says)
            raise ReferenceError(f"{self.path}: cannot load its reference: {e}{hint}") from None
        # A reference edited since the file was generated is still the yardstick (the user may
        # mean exactly that), but say so.
        self.reference_changed = (getattr(self.module, "KGEN_REFERENCE_SHA256", None)
                                   not in (None, self.reference.sha256))
        # (called with x alone by the checks and bench, get_inputs()' tensors after it come too)
        self.Model = self.reference.given_extra_inputs(self.reference.Model)
        self.ModelNew = self.reference.given_extra_inputs(self.module.ModelNew)
        # A BatchNorm the forward runs (its IR's), not one the module merely holds: an unused one
        # changes nothing the checks could see (batch 1 in training raises only where one runs).
        try:
            from kgen.frontend.trace import trace

            self.has_batchnorm = any(part.batchnorms for part in trace(self.reference).parts)
        except Exception:  # noqa: BLE001 - no IR of it (an older file's reference): the modules it holds
            self.has_batchnorm = any("BatchNorm" in type(m).__name__ for m in self.reference.meta_model().modules())
        # A module with an active Dropout whose mask kgen does not reproduce runs in eval mode
        # only (its forward refuses training mode): checks and timings use eval mode for it.
        self.dropouts = self.spec.graph().dropouts
        self.runs_in_training = all(d.get("reproduced") for d in self.dropouts)

    def _follow_a_moved_reference(self):
        """A file names its reference by the absolute path it had when the file was generated;
        after the tree moved (another checkout, another machine) that path is gone. The
        reference is then looked for under the same trailing path components below this
        file's folder and its parents, and the working directory, and taken only if its content
        has the sha256 the file recorded; the spec then names it there."""
        recorded, sha256 = self.spec.problem, getattr(self.module, "KGEN_REFERENCE_SHA256", None)
        if not is_path(recorded) or Path(recorded).is_file() or not sha256:
            return
        found = find_moved_reference(recorded, sha256, self.path)
        if found is None:
            found = self._embedded_reference(recorded, sha256)
        if found is not None:
            self.spec = self.spec.replace(problem=str(found))

    def _embedded_reference(self, recorded: str, sha256: str) -> Path | None:
        """The copy of the reference the file carries (`_KGEN_REFERENCE_SOURCE`, checked against the
        recorded sha256), written once under kgen's cache with the reference's file name: a
        file whose reference is nowhere to be found is still checked against exactly it."""
        from kgen.frontend.reference import sha256_text
        from kgen.tune.search import cache_dir

        source = getattr(self.module, "_KGEN_REFERENCE_SOURCE", None)
        if not isinstance(source, str) or sha256_text(source) != sha256:
            return None
        path = cache_dir() / "references" / sha256[:16] / Path(recorded).name
        try:
            if not path.is_file() or sha256_text(path.read_text()) != sha256:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(source)
        except OSError:
            return None
        self.reference_embedded = True
        return path

    def init_args(self) -> tuple:
        return tuple(self.reference.init_args())

    def build(self, dtype=None, autocast=False, fp32_weight=False):
        """The file's extension for the current GPU and a module in `dtype` (default fp32),
        compiled on first use; `autocast`: a 16-bit dtype's build for inside torch.autocast, a
        16-bit module's there, or with `fp32_weight` an fp32 module's, whose GEMM reads the fp32
        weight, where the file has one (_KGEN_FP32_WEIGHT; else the 16-bit module's). Where the
        file's training runs the C++ autograd node, the node too (~25 s once per machine and torch
        version, then cached): a search's parallel builds make it, not its first training check,
        which the GPU waits on."""
        # (only the arguments given: a file of an older kgen's takes no autocast)
        library = self.module._kgen_build(**({} if dtype is None else {"dtype": dtype}),
                                          **({"autocast": True} if autocast else {}),
                                          **({"fp32_weight": True} if autocast and fp32_weight
                                             and dtype in (torch.bfloat16, torch.float16)
                                             and getattr(self.module, "_KGEN_FP32_WEIGHT", False) else {}))
        if any(plan is not None for plan in getattr(self.module, "_KGEN_NATIVE_PLANS", ())):
            self.module._kgen_native_module()
        return library


def recorded_reference(source: str) -> tuple[str, Path | None]:
    """The reference's text an emitted file carries and the folder its KGEN_SPEC records (read,
    not run): ("", None) where either is not a literal."""
    values = {}
    for node in ast.parse(source).body:
        names = [getattr(t, "id", None) for t in node.targets] if isinstance(node, ast.Assign) else []
        if names in (["KGEN_SPEC"], ["_KGEN_REFERENCE_SOURCE"]):
            try:
                values[names[0]] = ast.literal_eval(node.value)
            except ValueError:
                pass
    text, spec = values.get("_KGEN_REFERENCE_SOURCE"), values.get("KGEN_SPEC")
    problem = spec.get("problem") if isinstance(spec, dict) else None
    return (text if isinstance(text, str) else "",
            Path(problem).parent if isinstance(problem, str) and is_path(problem) else None)


def not_emitted_message(path: Path, source: str) -> str:
    """Why `path` is refused as an emitted file, and what to run instead where it looks like a
    reference module (a class Model and get_inputs, no ModelNew)."""
    message = f"{path} is not a ModelNew file written by kgen (no KGEN_SPEC)"
    try:
        names = {node.name for node in ast.parse(source).body
                 if isinstance(node, (ast.ClassDef, ast.FunctionDef))}
    except SyntaxError:
        return message
    if {"Model", "get_inputs"} <= names and "ModelNew" not in names:
        message += (f"; it looks like a reference module: `kgen generate {path}` writes a ModelNew "
                    "for it; validate and bench take that file")
    return message


def find_moved_reference(recorded: str, sha256: str, emitted: Path) -> Path | None:
    """A file whose content has `sha256` at a tail of the `recorded` path (longest first) under
    the emitted file's folder, then each of its parents, then the working directory."""
    tail = Path(recorded).parts[1:]
    folder = emitted.resolve().parent
    for base in dict.fromkeys([folder, *folder.parents, Path.cwd()]):
        for i in range(len(tail)):
            candidate = base.joinpath(*tail[i:])
            if not candidate.is_file():
                continue
            try:  # hashed as kgen.frontend.reference.Reference hashes the text it reads
                digest = hashlib.sha256(candidate.read_text().encode()).hexdigest()
            except (OSError, UnicodeDecodeError):
                continue
            if digest == sha256:
                return candidate
    return None
