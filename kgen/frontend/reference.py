"""Reference modules in the KernelBench convention: a Python file defining `Model`,
`get_inputs()`, `get_init_inputs()`, usually with module-level constants that size them.

kgen executes the file (it is the user's own code, as KernelBench runs it), builds the model on
the meta device to read shapes without allocating, and keeps the text and its hash: an emitted
file carries that text and names its hash, so it is exactly what the file was generated from.

The workload is what the file says, under whatever names it uses: the input is what
`get_inputs()` returns, the constants are the file's module-level numbers (`batch_size`,
`input_size`, `hidden_size`, ... or none at all). `--batch`, `--in` and `--out` are mapped onto
the constant that actually sets the input's batch, the input's features or the last GEMM's
features, found by changing each constant in turn and seeing what moves; `--set NAME=VALUE` sets
any constant by name. The batch needs no constant: without one, inputs are drawn by calling
`get_inputs()` as often as needed and taking the rows asked for. An input of more dimensions,
(..., features) (a Linear over the last one), is taken as its rows: (rows, features); where the
module flattens trailing dimensions into its first GEMM's features (x.view(x.size(0), -1)), they
are the features: (batch, 16 x 32) of a (batch, 16, 32) input.
"""

from __future__ import annotations

import __future__
import ast
import contextlib
import hashlib
import inspect
import sys
import types
from pathlib import Path

import torch

from kgen.frontend import autocast

SHIPPED_DIR = Path(__file__).resolve().parents[1] / "refs"
SHIPPED_PREFIX = "kgen:"   # "kgen:NAME" names kgen/refs/NAME.py, the references shipped with kgen
# The workload dimensions --batch, --in and --out name (keys of Reference's `overrides`).
SHAPE_KEYS = ("batch", "in_features", "out_features")
OPTION_NAMES = {"batch": "--batch", "in_features": "--in", "out_features": "--out"}


class ReferenceError(ValueError):
    """A reference file that cannot be used; the message says why."""


# What the reference's own code (its top level, get_inputs(), Model's __init__ and forward) may
# raise that kgen reports as the file's failure: any exception, and an exit too (sys.exit() in
# the file would otherwise end kgen itself, silently, with the file's exit status).
USER_FAILURES = (Exception, SystemExit)


def said(e: BaseException) -> str:
    """The message of what the reference's code raised (an exit: the call that made it)."""
    if isinstance(e, SystemExit):
        return f"sys.exit({'' if e.code is None else repr(e.code)}) (kgen runs the file's code; it may not exit)"
    return str(e)


def _torch_defaults() -> tuple:
    """torch's default dtype and default-device context (None: no context, the CPU), read
    without asking the device itself (torch.get_default_device() makes a tensor there, which
    fails for "cuda" on a machine without a GPU)."""
    contexts = getattr(torch, "_GLOBAL_DEVICE_CONTEXT", None)
    return torch.get_default_dtype(), getattr(contexts, "device_context", None)


def _restore_defaults(dtype: torch.dtype, context) -> None:
    """torch's default dtype and device put back to what _torch_defaults read, where a file's text
    changed them. Only then: torch.set_default_device(d) enters a TorchFunctionMode for good (None
    leaves none), and one left on made every emitted file's forward take its custom op, as it
    does under a mode that records the call."""
    if torch.get_default_dtype() != dtype:
        torch.set_default_dtype(dtype)
    if _torch_defaults()[1] is not context:
        torch.set_default_device(None if context is None else context.device)


class _OnMeta(torch.overrides.TorchFunctionMode):
    """While kgen reads the workload (shapes and dtypes, on the meta device): tensors stay there
    whatever device get_inputs() names (`x.cuda()`, `device='cuda'`, `.to('cuda')`), so that
    reading it needs no GPU; a dtype named in `.to()` still applies."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func in (torch.Tensor.cuda, torch.Tensor.cpu, torch.Tensor.pin_memory):
            return args[0]
        if func is torch.Tensor.to:
            kwargs.pop("device", None)
            kept = [a for a in args[1:] if not isinstance(a, (str, torch.device, int))]
            kept = [a.dtype if isinstance(a, torch.Tensor) else a for a in kept]
            return args[0].to(*kept, **kwargs) if kept or kwargs.keys() - {"non_blocking", "copy"} else args[0]
        if "device" in kwargs:
            kwargs["device"] = "meta"
        return func(*args, **kwargs)


# The functions and methods whose first call in a forward, on the meta device, is the module's first
# GEMM (_first_gemm_mode): where its input operand is among their arguments.
_GEMM_INPUT = {torch.nn.functional.linear: 0, torch.matmul: 0, torch.Tensor.matmul: 0, torch.Tensor.__matmul__: 0,
               torch.mm: 0, torch.Tensor.mm: 0, torch.addmm: 1, torch.Tensor.addmm: 1}


# The calls that may select one token of a (batch, tokens, features) input (x[:, 0], x.select(1, k),
# torch.select(x, 1, k)), and those that give the input itself (_FirstGemm.selections).
_SELECTIONS = (torch.Tensor.__getitem__, torch.Tensor.select, torch.select)
_SAME_INPUT = (torch.Tensor.contiguous, torch.Tensor.clone, torch.Tensor.detach, torch.clone, torch.detach)


class _FirstGemm(torch.overrides.TorchFunctionMode):
    """Stops a forward at its first GEMM, keeping the shape of the operand it multiplies, and the
    calls before it that index the input (x, or its contiguous / clone / detach) as
    (function, arguments, keywords): where one selects a token, Reference._selected_token reads which."""

    class Reached(Exception):
        pass

    def __init__(self, x: torch.Tensor | None = None):
        super().__init__()
        self.shape = None
        self.inputs = [] if x is None else [x]   # (by identity: the meta device has no values to compare)
        self.selections: list[tuple] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _GEMM_INPUT and len(args) > _GEMM_INPUT[func] and isinstance(args[_GEMM_INPUT[func]], torch.Tensor):
            self.shape = tuple(args[_GEMM_INPUT[func]].shape)
            raise _FirstGemm.Reached
        result = func(*args, **kwargs)
        if args and any(args[0] is x for x in self.inputs):
            if func in _SELECTIONS:
                self.selections.append((func, args[1:], kwargs))
            elif func in _SAME_INPUT:
                self.inputs.append(result)
        return result


def _first_gemm_mode(ref: "Reference", x: torch.Tensor, extras=()) -> "_FirstGemm | None":
    """The forward run on input x (and the extra inputs after it) on the meta device up to its
    first GEMM: the mode that saw it (its operand's shape, the input's selections before it);
    None where it never reaches one or fails first."""
    mode = _FirstGemm(x)
    try:
        # (the caller's random states as they were: a module's __init__ may draw)
        with torch.random.fork_rng(devices=[]), torch.device("meta"):
            model = ref.Model(*ref.init_args())
            with torch.no_grad(), mode:
                model(x, *extras)
    except _FirstGemm.Reached:
        return mode
    except USER_FAILURES:  # a module the meta device cannot run: no answer here
        return None
    return None


def token_position(shape: tuple, func, args, kwargs) -> int | None:
    """The position p where an index of a (batch, tokens, features) tensor of `shape` (x[:, 0],
    x[:, -1, :], x.select(1, k): `func` called on it with `args` and `kwargs`) takes exactly the
    token p of each sample, every feature in order: x[:, p]; None for any other index (a slice of
    several tokens, a feature, a position that is a tensor). Read by calling it on tensors that
    number the batch, the tokens and the features (expanded: no memory of the shape's)."""
    if len(shape) != 3 or 0 in shape:
        return None
    leaves: list = []
    for a in (*args, *kwargs.values()):
        leaves += list(a) if isinstance(a, (tuple, list)) else [a]
    if any(isinstance(v, torch.Tensor) for v in leaves):
        return None   # (a position that is a tensor: x[:, idx])
    batch = 2
    numbered = [torch.arange(n).view([n if i == d else 1 for i in range(3)]).expand(batch, *shape[1:])
                for d, n in enumerate((batch, *shape[1:]))]
    try:
        b, t, f = (func(n, *args, **kwargs) for n in numbered)
    except (IndexError, TypeError, RuntimeError, ValueError):
        return None
    if any(not isinstance(v, torch.Tensor) or tuple(v.shape) != (batch, shape[2]) for v in (b, t, f)):
        return None
    positions = t.unique()
    if positions.numel() != 1 or not torch.equal(b, torch.arange(batch).view(batch, 1).expand_as(b)) \
            or not torch.equal(f, torch.arange(shape[2]).expand_as(f)):
        return None
    return int(positions.item())


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


def local_imports(source: str, folder: Path) -> list[str]:
    """The modules the file's text imports (at any depth of it) that are files or packages in
    `folder`, its own: a script's imports find them there, as kgen and the emitted file do."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module.split(".")[0])
    return sorted({n for n in names if (folder / f"{n}.py").is_file() or (folder / n / "__init__.py").is_file()})


# The names of the modules texts imported from beside them (imports_beside).
_IMPORTED_BESIDE: set[str] = set()


@contextlib.contextmanager
def imports_beside(source: str, folders: list[Path]):
    """While the text runs, each of `folders` that holds a module it imports (local_imports) and
    is not on sys.path yet is first on it; the path is as it was after. A module of such a name
    that an earlier text imported from beside it, from a file other than one of these folders',
    is dropped from sys.modules first: the text runs its own (`from helpers import act` beside
    two references of one `kgen search` in two folders: the second traced the first's helpers,
    and its file was judged against them, not against what its reference runs). One of the
    same file stays, as a process imports a module once (the reference's text run again for its
    emitted file makes the same classes, an Enum member of get_init_inputs() the same member)."""
    added, files = [], {}
    for folder in folders:
        local = local_imports(source, folder)
        for name in local:
            files.setdefault(name, set()).update(
                f.resolve() for f in (folder / f"{name}.py", folder / name / "__init__.py") if f.is_file())
        entry = str(folder)
        if local and entry not in sys.path:
            sys.path.insert(0, entry)
            added.append(entry)
    for name, own in files.items():
        loaded = getattr(sys.modules.get(name), "__file__", None)
        if name in _IMPORTED_BESIDE and loaded is not None and Path(loaded).resolve() not in own:
            for module in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
                del sys.modules[module]
    before = set(sys.modules)
    try:
        yield
    finally:
        for entry in added:
            sys.path.remove(entry)
        # (those it imported: a module of the name already loaded, torch beside a torch.py, is not)
        _IMPORTED_BESIDE.update(name for name in files if name in sys.modules and name not in before)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def module_constants(source: str, namespace: dict) -> dict[str, int | float]:
    """The file's module-level numeric constants, in the order the file assigns them: names
    bound at the top level by a plain assignment whose value (after executing the file) is an
    int or float (not a bool)."""
    names: list[str] = []
    for node in ast.parse(source).body:
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, ast.AnnAssign) else [])
        for t in targets:
            for name in ([t] if isinstance(t, ast.Name) else getattr(t, "elts", [])):
                if isinstance(name, ast.Name) and name.id not in names:
                    names.append(name.id)
    out = {}
    for name in names:
        value = namespace.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[name] = value
    return out


# get_inputs() draws on the CPU: 80 ms for a 1024 x 8192 input on a GPU host, a second of every
# search candidate's quick validation, which asks for the same draws as the candidate before it
# (each check seeds torch before it draws). A draw depends on the file, its module-level
# constants and the random states it may read (torch's CPU and CUDA generators, Python's, NumPy's),
# so a call with all of those as an earlier one's gets a copy of that call's values and leaves the
# random states where that call left them: what the call itself would have done. Kept per process,
# up to _DRAW_BYTES of CPU tensors (the first draws; a later one is not kept once they fill it).
# Not for a file whose module holds a random source of its own or a tensor (`_memoizable`: a
# torch.Generator, NumPy's or Python's generator objects, a tensor drawn at import, which the
# key cannot see), nor for a draw that returns a tensor off the CPU (held, it would be GPU memory
# the checks may need).
_DRAWS: dict[str, tuple[list, tuple]] = {}
_DRAW_BYTES = 1 << 30


def _rng_states() -> tuple:
    import random
    import sys

    numpy = sys.modules.get("numpy")
    return (torch.get_rng_state(), torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None,
            random.getstate(), numpy.random.get_state() if numpy is not None else None)


def _set_rng_states(states: tuple) -> None:
    import random
    import sys

    cpu, cuda, python, numpy_state = states
    torch.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state_all(cuda)
    random.setstate(python)
    if numpy_state is not None:
        sys.modules["numpy"].random.set_state(numpy_state)


def _memoizable(ref: "Reference") -> bool:
    """Whether the file's module holds nothing a draw may read that _draw_key cannot see."""
    import random
    import sys

    numpy = sys.modules.get("numpy")
    own_sources = (torch.Tensor, torch.Generator, random.Random) + (
        (numpy.random.Generator, numpy.random.RandomState, numpy.random.BitGenerator) if numpy is not None else ())
    return not any(isinstance(v, own_sources) for v in ref.module.__dict__.values())


def _draw_key(ref: "Reference") -> str:
    import pickle

    constants = sorted((k, repr(v)) for k, v in ref.module.__dict__.items()
                       if not k.startswith("__") and isinstance(v, (bool, int, float, str, tuple, list, torch.dtype)))
    cpu, cuda, python, numpy_state = _rng_states()
    h = hashlib.sha256(ref.sha256.encode())
    h.update(repr(constants).encode())
    # (what torch.rand(...) makes without a dtype or device said)
    h.update(f"{torch.get_default_dtype()} {torch.get_default_device()}".encode())
    h.update(cpu.numpy().tobytes())
    for state in cuda or ():
        h.update(state.numpy().tobytes())
    h.update(pickle.dumps(python))
    h.update(pickle.dumps(numpy_state))
    return h.hexdigest()


def _tensor_bytes(values: list) -> int:
    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


def _remember(key: str, entry: tuple) -> bool:
    """Keeps the draw where its tensors are all on the CPU and fit in _DRAW_BYTES; whether it did."""
    if any(isinstance(v, torch.Tensor) and v.device.type != "cpu" for v in entry[0]):
        return False
    if sum(_tensor_bytes(values) for values, _ in _DRAWS.values()) + _tensor_bytes(entry[0]) > _DRAW_BYTES:
        return False
    _DRAWS[key] = entry
    return True


class Reference:
    def __init__(self, ref: str | Path, overrides: dict | None = None, constants: dict | None = None):
        """`ref`: a path, or kgen:NAME. `constants`: values for module-level constants by name
        (--set). `overrides`: the workload's batch, in_features, out_features (None: as the
        file says); each is mapped onto the constant that sets it, and one that no constant
        sets is an error unless it equals what the file already gives (the batch excepted:
        see `inputs`)."""
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
        self.sha256 = sha256_text(self.source)
        self.name = self.path.stem
        self.defaults: dict[str, int | float] = {}
        self.set_constants: dict[str, int | float] = {}
        self._execute()
        for name in ("Model", "get_inputs", "get_init_inputs"):
            if name not in self.module.__dict__:
                raise ReferenceError(f"{self.path} defines no {name} (KernelBench convention: Model, "
                                     "get_inputs(), get_init_inputs())")
        if not (isinstance(self.Model, type) and issubclass(self.Model, torch.nn.Module)):
            # (the emitted file's ModelNew subclasses Model: `class ModelNew(Model)` of a function
            # that returns a module, nn.Sequential(...) say, is a TypeError when the file is imported)
            what = (f"a {type(self.Model).__name__}" if not isinstance(self.Model, type)
                    else f"the class {self.Model.__name__}, which is no torch.nn.Module")
            raise ReferenceError(f"{self.path}: Model is {what}; kgen's ModelNew subclasses Model, so it must be "
                                 "an nn.Module class (class Model(nn.Module): ... with __init__ and forward)")
        self.defaults = module_constants(self.source, self.module.__dict__)
        for name, value in (constants or {}).items():
            self._set(name, value, "--set")
        self._read_workload()
        # Where no constant sets the batch, `inputs` draws get_inputs() again and takes rows.
        self.batch_override: int | None = None
        self.applied: list[str] = []   # what the overrides changed, for the CLI to say
        asked = {key: int(v) for key, v in (overrides or {}).items() if v is not None}
        for key, value in asked.items():
            self._override(key, value)
        # One constant may set two of them (a `features` used for both in and out), or an
        # override may undo a --set: every request must still hold after all of them.
        for key, value in asked.items():
            got = self._measure(key)
            if got != value:
                raise ReferenceError(f"{self.path}: {OPTION_NAMES[key]} {value} cannot hold with the other "
                                     f"options: the constants set ({', '.join(self.applied)}) give {got}")
        for name, value in (constants or {}).items():
            if self.module.__dict__.get(name) != value and name in self.defaults:
                raise ReferenceError(f"{self.path}: --set {name}={value} is undone by another option "
                                     f"(it is {self.module.__dict__.get(name)} now)")

    def _execute(self):
        """Runs the file's top-level statements in order, each constant set so far pinned as soon
        as the file assigns it, so that what the file derives from it follows (KernelBench 33:
        `scale_shape = (out_features,)`). The emitted file loads its copy of the text the same
        way (`_load_reference`)."""
        self.module = types.ModuleType(f"kgen_reference_{self.name}")
        self.module.__dict__["__file__"] = str(self.path)
        # In sys.modules while its text runs, as an imported file is: dataclasses looks a class's
        # module up there as it makes the class (`from __future__ import annotations` with a
        # @dataclass fails without it); whatever held the name before has it back after.
        name = self.module.__name__
        before = sys.modules.get(name)
        sys.modules[name] = self.module
        # torch's process-wide defaults, which a file may set at import (torch.set_default_device,
        # set_default_dtype): put back after it, so that they do not reach kgen's own tensors
        # (a default device of "cuda" failed the lowering's oracles on a machine without a GPU).
        defaults = _torch_defaults()
        try:
            tree = ast.parse(self.source, filename=str(self.path))
            # The file's __future__ imports apply to each statement compiled alone (and kgen's
            # own do not: dont_inherit).
            flags = 0
            for node in tree.body:
                if isinstance(node, ast.ImportFrom) and node.module == "__future__":
                    for alias in node.names:
                        flags |= getattr(__future__, alias.name).compiler_flag
            # (a torch.autocast decorating forward is made here; its imports resolve as a script's
            # do, from its own folder first, where python puts a script's: a helper module beside it)
            with autocast.asked_enabled(), imports_beside(self.source, [self.path.parent]):
                for statement in tree.body:
                    exec(compile(ast.Module([statement], []), str(self.path), "exec", flags=flags,
                                 dont_inherit=True), self.module.__dict__)
                    self.module.__dict__.update({k: v for k, v in self.set_constants.items()
                                                 if k in self.module.__dict__})
        except USER_FAILURES as e:  # the user's file failing is a message
            raise ReferenceError(f"{self.path} raised {type(e).__name__} when executed: {said(e)}") from None
        finally:
            if before is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = before
            dtype = torch.get_default_dtype()
            _restore_defaults(*defaults)
        # (A default device is where the module's tensors are made, which kgen reads on the meta
        # device anyway and the emitted file runs on the GPU; a default dtype is what the module
        # computes in, the file's and every module's after it.)
        if dtype != defaults[0]:
            raise ReferenceError(f"{self.path} sets torch's default dtype to {dtype} when executed "
                                 "(torch.set_default_dtype): it changes every tensor the process makes after it; "
                                 "build the module in float32 and convert it where it is used (model.to(dtype))")
        self.Model = self.module.__dict__.get("Model")

    # ---- constants ---------------------------------------------------------------------------
    def _set(self, name: str, value, why: str):
        if name not in self.defaults:
            known = ", ".join(self.defaults) or "none"
            raise ReferenceError(f"{self.path} has no module-level constant {name!r} for {why} to set "
                                 f"(its numeric constants: {known})")
        if isinstance(self.defaults[name], int) and isinstance(value, float) and value.is_integer():
            value = int(value)
        if value == self.defaults[name]:
            self.set_constants.pop(name, None)
        else:
            self.set_constants[name] = value
        self._execute()

    def constants(self) -> dict:
        """Every numeric module-level constant as the workload has it (overrides applied)."""
        return {name: self.module.__dict__[name] for name in self.defaults}

    def _number_input_message(self, inputs: list, k: int) -> str:
        """Why get_inputs()' number at place k (after the input: `return [x, 0.5]` with
        `forward(self, x, scale)`) is refused, and the spellings kgen takes for it instead, with
        the forward's name for it and its value: a constructor argument, a default of the
        forward's that get_inputs() leaves out, or a tensor of the input's rows."""
        value = inputs[k]
        try:
            params = [p for p in inspect.signature(self.Model.forward).parameters.values()][1:]
        except (TypeError, ValueError):
            params = []
        name = params[k].name if k < len(params) and params[k].kind in (
            inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD) else f"input{k}"
        kinds = ", ".join("None" if v is None else type(v).__name__ for v in inputs)
        leading = (", ".join(map(str, inputs[0].shape[:-1])) if isinstance(inputs[0], torch.Tensor)
                   and inputs[0].dim() >= 2 else "batch_size")
        rows = f"torch.full(({leading}, 1), {value!r})"
        return (f"{self.path}: get_inputs() returns {len(inputs)} values ({kinds}): value {k + 1}, {value!r}, is a "
                f"number, which Model.forward takes as `{name}`; kgen takes tensors there (the module's input, then "
                "tensors its forward reads after the GEMM) and does not pass a number to its kernels at run time. "
                f"Write it as a constructor argument (get_init_inputs() returns it, __init__ keeps "
                f"self.{name} = {name}, forward reads self.{name}), or as a default of forward's that get_inputs() "
                f"leaves out (def forward(self, x, {name}={value!r}): the file is made for that value), or as a "
                f"tensor of the input's rows ({rows}: read after the GEMM per row)")

    def _read_workload(self):
        # KernelBench calls the module as model(*get_inputs()): a list or tuple of the forward's
        # arguments (any iterable unpacks so, a generator too: read here, on the meta device). A
        # tensor or a dict unpacks into its rows or its keys, not the input.
        def not_a_list(what: str) -> ReferenceError:
            return ReferenceError(f"{self.path}: get_inputs() returns {what}, not a list of the forward's "
                                  "arguments (the module is called as model(*get_inputs())): return [x]")

        with torch.device("meta"), _OnMeta():
            try:
                inputs = self.module.get_inputs()
                if isinstance(inputs, (torch.Tensor, dict)):
                    raise not_a_list("a tensor" if isinstance(inputs, torch.Tensor) else "a dict")
                try:
                    iter(inputs)
                except TypeError:
                    raise not_a_list("None" if inputs is None else type(inputs).__name__) from None
                inputs = list(inputs)
                self._init_args = list(self.module.get_init_inputs())
            except ReferenceError:
                raise
            except USER_FAILURES as e:  # the user's functions failing is a message
                raise ReferenceError(f"{self.path}: get_inputs() / get_init_inputs() raised "
                                     f"{type(e).__name__}: {said(e)}") from None
        tensors = [t for t in inputs if isinstance(t, torch.Tensor)]
        number = next((k for k, v in enumerate(inputs) if isinstance(v, (bool, int, float)) and k), None)
        if tensors and number is not None:
            raise ReferenceError(self._number_input_message(inputs, number))
        if not inputs or len(tensors) != len(inputs):
            kinds = ", ".join("None" if v is None else type(v).__name__ for v in inputs)
            raise ReferenceError(f"{self.path}: get_inputs() returns {len(inputs)} value"
                                 f"{'' if len(inputs) == 1 else 's'} ({kinds or 'none'}); kgen takes tensors: "
                                 "the module's input, then any tensors its forward reads after the GEMM (a "
                                 "residual, a gate); a number or None is no input (make it a constructor argument)")
        # The input's rank and dtype are checked by the tracer, after it has named the first op
        # (a Conv2d on a 4-D input is refused as a Conv2d).
        self.input, *extras = tensors
        drawn_shape = tuple(self.input.shape)   # (before the rows and a batch asked for)
        self._drawn_extras = extras   # (as get_inputs() gives them: the first GEMM's search runs the forward on them)
        # An input of more dimensions, (..., features): the workload is its rows, (rows, features),
        # what the tracer and everything after it see; the tracer checks that the module computes
        # the same on them (trace._check_rows) and the emitted forward reshapes (model_new.py.j2).
        # Its features may be several trailing dimensions flattened before the first GEMM
        # (x.view(x.size(0), -1), flatten(1), nn.Flatten: a CNN head's habit): `feature_dims` of
        # them, as the module's first GEMM reads them (_first_gemm_mode).
        # Or its first GEMM reads one token of a (batch, tokens, features) input (BertPooler's
        # x[:, 0], a decoder head's x[:, -1]): the workload is the (batch, features) of that token
        # (`token_of` the input's shape, `token_at` the token's place in it), which the tracer
        # reads as the selection names it (Tracer._on_tokens).
        self.rows_of: tuple | None = None
        self.feature_dims = 1
        self.token_of: tuple | None = None
        self.token_at: int | None = None
        if self.input.dim() > 2 and self.input.shape[-1] > 0:
            shape = tuple(self.input.shape)
            seen = _first_gemm_mode(self, torch.empty(shape, dtype=self.input.dtype, device="meta"), self._drawn_extras)
            self.token_at = self._selected_token(shape, seen)
            if self.token_at is not None:
                self.token_of = shape
                self.input = torch.empty((shape[0], shape[2]), dtype=self.input.dtype, device="meta")
            else:
                self.rows_of = shape
                self.feature_dims = self._flattened_feature_dims(None if seen is None else seen.shape)
                k = self.input.shape[-self.feature_dims:].numel()
                self.input = torch.empty((self.input.numel() // k, k), dtype=self.input.dtype, device="meta")
        if getattr(self, "batch_override", None) is not None and self.input.dim():
            self.input = torch.empty((self.batch_override, *self.input.shape[1:]), dtype=self.input.dtype,
                                     device="meta")
            if self.token_of is not None:
                self.token_of = (self.batch_override, *self.token_of[1:])
        # The tensors after the input (a residual, a gate): read after the GEMM, per element, each
        # with the input's rows (_extra_input).
        self.extra_inputs = [self._extra_input(k, t, drawn_shape) for k, t in enumerate(extras, 1)]
        for a in self._init_args:
            if isinstance(a, torch.Tensor):
                raise ReferenceError(f"{self.path}: get_init_inputs() returns a tensor; kgen needs "
                                     "plain values it can write into the emitted file")

    def _extra_input(self, k: int, t: torch.Tensor, drawn_shape: tuple) -> torch.Tensor:
        """get_inputs()' tensor k (k >= 1: after the module's input) as the workload reads it:
        (rows, d), the input's rows (its batch, or the rows of a (..., features) input) by its own
        last dimension d, which the tracer checks broadcasts to the output where the forward reads
        it. Refused: a tensor of another dtype than the input's (eager would promote the output),
        one without the input's leading dimensions ((N,), (1, N): a parameter's shapes; make it a
        buffer). `drawn_shape`: the input's as get_inputs() gave it."""
        leading = tuple(drawn_shape[:1 if self.token_of else len(drawn_shape) - self.feature_dims])
        what = f"{self.path}: get_inputs()' value {k + 1}, a tensor of shape {tuple(t.shape)} and {t.dtype}"
        if t.dtype != self.input.dtype:
            raise ReferenceError(f"{what}: kgen takes extra inputs in the module input's dtype ({self.input.dtype}), "
                                 "read after the GEMM")
        if t.dim() < 2 or tuple(t.shape[:-1]) != leading or t.shape[-1] == 0:
            raise ReferenceError(f"{what}: kgen takes an extra input with the input's rows, "
                                 f"({', '.join(map(str, leading))}, d), read after the GEMM (a residual of the "
                                 "output's shape, or d = 1); a tensor without them (features,) or (1, features) is "
                                 "a parameter's shape: make it a buffer of the module")
        return torch.empty((int(self.input.shape[0]), int(t.shape[-1])), dtype=t.dtype, device="meta")

    def rows_text(self) -> str:
        """The (..., features) input as messages name it: (..., 32), or (..., 16, 32) where two
        dimensions are the features."""
        return f"(..., {', '.join(map(str, self.rows_of[-self.feature_dims:]))})"

    def _flattened_feature_dims(self, seen: tuple | None) -> int:
        """How many trailing dimensions of the (..., features) input (rows_of) the module's first
        GEMM reads as its features: all after the batch where its operand, of shape `seen`
        (_first_gemm_mode's, None where the meta device cannot run the forward that far), is the
        input flattened to (batch, features) (2 for (B, 16, 32) flattened to (B, 512)). 1
        (the last dimension, a Linear over it) where the GEMM reads the input as it is, or where
        the module cannot be run on the meta device to see it. Whether the module computes the
        same on those rows is the tracer's question (trace._check_rows)."""
        if seen is None or len(seen) < 2:
            return 1
        # (Every dimension after the batch, alone: kgen runs the module itself on the flattened
        # input, (batch, features), which flatten(1) and view(x.size(0), -1) leave as it is; the
        # rows of a partial flatten, (B, 5, 4, 6) to (B, 5, 24), are no input the module takes.)
        shape, dims = torch.Size(self.rows_of), len(self.rows_of) - 1
        # (no features at all, a size 0 after the batch: the tracer's refusal, not a flatten)
        return dims if tuple(seen) == (shape[0], shape[1:].numel()) and shape[1:].numel() > 0 else 1

    @staticmethod
    def _selected_token(shape: tuple, seen: "_FirstGemm | None") -> int | None:
        """Where the module's first GEMM reads one token of its (batch, tokens, features) input of
        `shape`, (batch, features), selected by the forward's first index of the input (x[:, 0],
        x[:, -1, :], x.select(1, k), of x or its contiguous()), as `seen` (_first_gemm_mode's; None
        where the meta device cannot run the forward that far) saw it: that token's place, 0 <= p
        < tokens; None otherwise (the input's rows, or refused by the tracer)."""
        if seen is None or len(shape) != 3 or seen.shape != (shape[0], shape[2]) or not seen.selections:
            return None
        return token_position(shape, *seen.selections[0])

    def _measure(self, key: str, fresh: bool = False) -> int | None:
        """The workload's current value of batch / in_features / out_features (None where the
        module cannot be built). out_features is the last GEMM's width: of the GEMM the first
        trace found, or, `fresh`, of a new trace (a `num_layers` moves which GEMM is last)."""
        if key in ("batch", "in_features"):
            return int(self.input.shape[0 if key == "batch" else -1]) if self.input.dim() else None
        from kgen.ir.graph import gemm_weight
        from kgen.frontend.trace import trace

        try:
            if fresh:
                gemm = trace(self).parts[-1].gemm
            else:
                # A module kgen cannot trace has no GEMM to size: its refusal is the message.
                if not hasattr(self, "_last_gemm"):
                    self._last_gemm = trace(self).parts[-1].gemm
                gemm = self._last_gemm
            with torch.device("meta"):
                return int(gemm_weight(self.meta_model(), gemm).shape[0])
        except Exception as e:  # noqa: BLE001 - a value the module cannot take moves nothing
            if not fresh and not hasattr(self, "_last_gemm"):
                raise
            self._build_error = f"{type(e).__name__}: {e}"
            return None

    def _doubled(self, name: str, measure):
        """measure() with constant `name` doubled (None where the file fails with it); the
        workload is back as it was afterwards."""
        saved = dict(self.set_constants)
        self.set_constants[name] = self.constants()[name] * 2
        try:
            self._execute()
            self._read_workload()
            return measure()
        except ReferenceError:
            return None
        finally:
            self.set_constants = saved
            self._execute()
            self._read_workload()

    def constant_for(self, key: str) -> list[str]:
        """The constants that set `key` (batch, in_features or out_features): those whose change
        (doubled) changes it, found by trying each, since files name them as they please. Of
        several, those that move nothing else of the workload (`out_features = in_features * 2`:
        out's own constant, not in's; the last GEMM found afresh each time)."""
        before = self._measure(key)
        names = [name for name, value in self.constants().items()
                 if isinstance(value, int) and value >= 1
                 and self._doubled(name, lambda: self._measure(key)) not in (None, before)]
        if len(names) < 2:
            return names

        def workload():
            return tuple(self._measure(k, fresh=True) for k in SHAPE_KEYS)

        now = workload()
        only = []
        for name in names:
            after = self._doubled(name, workload)
            if after is not None and [a != b for a, b in zip(after, now)] == [k == key for k in SHAPE_KEYS]:
                only.append(name)
        return only or names

    def _override(self, key: str, value: int):
        current = self._measure(key)
        if value == current:
            return
        if key == "batch" and self.rows_of is not None:
            # The batch of an input of more dimensions is its rows, which no one constant sets.
            self.batch_override = value
            self._read_workload()
            self.applied.append(f"batch {value} (the input is {self.rows_text()}: {value} of its rows, "
                                "from repeated get_inputs() calls)")
            return
        names = self.constant_for(key)
        if len(names) != 1:
            if key == "batch" and not names:
                self.batch_override = value
                self._read_workload()
                self.applied.append(f"batch {value} (no constant sets it: inputs are rows of "
                                    "repeated get_inputs() calls)")
                return
            what = {"batch": "the input's batch", "in_features": "the input's features",
                    "out_features": "the last GEMM's output features"}[key]
            why = ("no module-level constant sets " + what if not names else
                   f"several constants set {what} ({', '.join(names)}); use --set NAME=VALUE")
            raise ReferenceError(f"{self.path}: {OPTION_NAMES[key]} {value}: {why} (the file gives "
                                 f"{current}; its numeric constants: {', '.join(self.defaults) or 'none'})")
        (name,) = names
        self._set(name, value, OPTION_NAMES[key])
        self._read_workload()
        self._build_error = None
        got = self._measure(key)
        if got != value:
            why = (f"the module cannot be built with it ({self._build_error})" if got is None and self._build_error
                   else f"that gives {got}")
            raise ReferenceError(f"{self.path}: {OPTION_NAMES[key]} {value}: setting {name} = {value}: {why}")
        self.applied.append(f"{name} = {value}")

    # ---- what the module is built from and run on -------------------------------------------------
    def init_args(self) -> list:
        return list(self._init_args)

    def inputs(self, batch: int | None = None) -> list[torch.Tensor]:
        """The reference's own get_inputs() (on the CPU, as KernelBench calls it), with `batch`
        rows [the workload's]: where no constant sets the batch, rows of as many calls as it
        takes (the same distribution, whatever get_inputs draws). The input, then its extra
        inputs (extra_inputs), each taken at the same rows."""
        batch = batch or int(self.input.shape[0])
        draws = [[self._rows(t) for t in self.draw()]]
        rows = draws[0][0].shape[0]
        while rows < batch:
            draws.append([self._rows(t) for t in self.draw()])
            rows += draws[-1][0].shape[0]
        out = []
        for chunks in zip(*draws):
            value = torch.cat(chunks)[:batch] if len(chunks) > 1 or rows != batch else chunks[0]
            out.append(value.contiguous())
        return out

    def extra_inputs_for(self, x, through: torch.dtype | None = None) -> list[torch.Tensor]:
        """get_inputs()' tensors after the input (extra_inputs) for a call on x: drawn once per
        number of rows as `inputs` draws them, at x's rows (the workload's where x is no tensor),
        then on x's device and in its dtype, rounded `through` a dtype first (an fp64 model's
        extra inputs as its 16-bit twin's are: Trio's fp64 copy of a bf16 module). One draw for
        every dtype and device of a batch, so that the fp32, fp64 and 16-bit models of one check
        read the same values; the same tensors on every call (a timing loop moves none)."""
        rows = int(x.shape[0]) if isinstance(x, torch.Tensor) and x.dim() else int(self.input.shape[0])
        device, dtype = (x.device, x.dtype) if isinstance(x, torch.Tensor) else ("cuda", self.input.dtype)
        drawn = self.__dict__.setdefault("_extras_drawn", {})
        if rows not in drawn:
            # (the caller's random states left as they were: drawn inside a forward, a draw that
            # moved them would give a Dropout after it another mask than the other models')
            devices = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
            with torch.random.fork_rng(devices=devices):
                drawn[rows] = self.inputs(rows)[1:]
        moved = self.__dict__.setdefault("_extras_moved", {})
        key = (rows, str(device), dtype, through)
        if key not in moved:
            moved[key] = [(t if through is None else t.to(through)).to(device, dtype) for t in drawn[rows]]
        return moved[key]

    def given_extra_inputs(self, cls: type) -> type:
        """`cls` (the reference's Model, or a ModelNew) as the checks, bench and the search call it:
        with the input alone, x, which they vary (a NaN, a scale, a batch, a view), as the rows
        (batch, K) the workload is. Where get_inputs() gives tensors after it, a subclass whose call
        with x alone passes them too (extra_inputs_for(x), rounded through the instance's
        `kgen_extra_inputs_through` dtype where it has one), and a call with more arguments as it
        is. Where the forward reads its (..., K) input's leading sizes (`B, S, D = x.shape`:
        trace.Tracer.leads), it cannot run on rows, so a call with rows x gives it x as one sample
        of them, x.view(1, .., 1, R, K) (and each tensor after it, (R, d), likewise), and its output
        back as the rows' (the trace checked the module computes the same at leading sizes of 1:
        trace._check_leads). Where its first GEMM reads one token of a (batch, tokens, features)
        input (token_of), a call with that token's rows x gives the forward the input around them
        (tokens_around). `cls` itself otherwise."""
        leads = self._leads_read()
        if not self.extra_inputs and not leads and self.token_of is None:
            return cls
        reference = self

        def forward(self, x, *args, **kwargs):
            if not args and not kwargs and reference.extra_inputs:
                args = reference.extra_inputs_for(x, getattr(self, "kgen_extra_inputs_through", None))
            if reference.token_of is not None and isinstance(x, torch.Tensor) and x.dim() == 2:
                x = reference.tokens_around(x)
            if leads and isinstance(x, torch.Tensor) and x.dim() == 2 and not kwargs and all(
                    isinstance(t, torch.Tensor) and t.dim() == 2 for t in args):
                # (every input as one sample of its rows: x and the tensors after it alike)
                one = (1,) * (leads - 1)
                out = cls.forward(self, x.reshape(*one, *x.shape), *(t.reshape(*one, *t.shape) for t in args))
                return out.reshape(x.shape[0], *out.shape[leads:]) if out.dim() >= leads else out
            return cls.forward(self, x, *args, **kwargs)

        return type(cls.__name__, (cls,), {"forward": forward, "__module__": cls.__module__, "__doc__": cls.__doc__,
                                           "__qualname__": cls.__qualname__})

    def tokens_around(self, x: torch.Tensor) -> torch.Tensor:
        """The (batch, tokens, features) input whose selected token (token_at) is the rows x
        (batch, features), every other token zeros: the module's input for the workload's rows,
        at the reference's number of tokens. Differentiable in x: the input's gradient at that
        token is x's (the tracer took the module only where it reads no other token)."""
        tokens, p = self.token_of[1], self.token_at
        b, d = x.shape
        return torch.cat([x.new_zeros(b, p, d), x.unsqueeze(1), x.new_zeros(b, tokens - p - 1, d)], 1)

    def timed_input(self, x: torch.Tensor) -> torch.Tensor:
        """The input bench times the models on, for the workload's rows x: the (batch, tokens,
        features) input around them where the first GEMM reads one token (tokens_around), so that
        each model's time holds its own selection of the token and no copy into a new input; x
        itself otherwise."""
        return x if self.token_of is None else self.tokens_around(x)

    def _leads_read(self) -> int:
        """The leading sizes of the (..., K) input the forward reads (trace.Tracer.leads, Graph.leads;
        0: it runs on its rows, or its input is (batch, K)), from its trace, once."""
        if self.rows_of is None:
            return 0
        if "_leads" not in self.__dict__:
            from kgen.frontend.trace import trace   # (the trace reads this module: imported here)
            from kgen.ir.graph import Unsupported

            try:
                self._leads = trace(self).leads
            except Unsupported:
                self._leads = 0   # (refused: nothing runs it on rows either)
        return self._leads

    def _rows(self, x: torch.Tensor) -> torch.Tensor:
        """An input of get_inputs() as the workload takes it: its rows where it is (..., features),
        its feature_dims trailing dimensions flattened into the features."""
        if self.token_of is not None and x.dim() == 3:
            return x[:, self.token_at]   # (the token the first GEMM reads: its rows, made contiguous by `inputs`)
        if self.rows_of is None or x.dim() <= 2:
            return x
        return x.reshape(-1, x.shape[-self.feature_dims:].numel())

    def draw(self) -> list:
        """One call of the file's get_inputs(), as its caller would have it (the RNG states moved
        as the call moves them), memoized: see _DRAWS."""
        if not _memoizable(self):
            return list(self.module.get_inputs())
        key = _draw_key(self)
        hit = _DRAWS.get(key)
        if hit is None:
            values = list(self.module.get_inputs())
            if not _remember(key, (values, _rng_states())):
                return values
        else:
            values = hit[0]
            _set_rng_states(hit[1])
        # (copies: the kept values stay as drawn whatever a caller does to its own; a leaf that
        # requires grad stays one)
        return [v.detach().clone().requires_grad_(v.requires_grad) if isinstance(v, torch.Tensor) else v
                for v in values]

    def output_dtype(self, dtype: torch.dtype | None = None) -> torch.dtype | None:
        """The dtype of the forward's output, the module and its input as built (or converted to
        `dtype`, as model.to(dtype) converts them), run on the meta device (torch's own type
        promotion and casts); None where the meta device cannot run it."""
        try:
            with torch.random.fork_rng(devices=[]), torch.device("meta"), _OnMeta():
                model = self.Model(*self.init_args())
                # (a module of one token: called with its (batch, tokens, features) input, token_of)
                x = torch.empty(self.token_of or self.input.shape, dtype=self.input.dtype, device="meta")
                extras = [torch.empty(t.shape, dtype=t.dtype, device="meta") for t in self.extra_inputs]
                if dtype is not None:
                    model, x, extras = model.to(dtype), x.to(dtype), [t.to(dtype) for t in extras]
                with torch.no_grad():
                    out = model(x, *extras)
        except USER_FAILURES:
            return None
        return out.dtype if isinstance(out, torch.Tensor) else None

    def meta_model(self) -> torch.nn.Module:
        try:
            # (_OnMeta: a module that moves itself to the GPU in __init__, self.cuda() or
            # self.to("cuda"), stays on the meta device, as get_inputs()' tensors do)
            with torch.device("meta"), _OnMeta(), autocast.asked_enabled():
                return self.Model(*self._init_args)
        except USER_FAILURES as e:  # the module's own failure is the user's message
            raise ReferenceError(f"{self.path}: Model(*get_init_inputs()) raised {type(e).__name__}: {said(e)}") from None

    def docstring(self) -> str:
        """The first line of Model's docstring (empty without one), for the emitted file's header
        and ModelNew's docstring, which carry it verbatim in plain triple-quoted strings; empty too
        where it cannot be carried so: a backslash would start an escape there (r"W\\x" a
        SyntaxError), a triple quote would end the string, and KernelBench's static checker reads
        string contents as code ("A forward pass: ..." fails a file as a pass statement does)."""
        from kgen.check.static_checks import kernelbench_strict_matches

        lines = (self.Model.__doc__ or "").strip().splitlines()
        line = lines[0].strip() if lines else ""
        if "\\" in line or '"""' in line or kernelbench_strict_matches(line):
            return ""
        return line
