"""Spec -> emitted ModelNew file: render the templates, write atomically."""

from __future__ import annotations

import ast
import base64
import dataclasses
import functools
import hashlib
import keyword
import math
import os
import pprint
import re
import tempfile
import typing
from pathlib import Path

import jinja2

from kgen import __version__
from kgen.pysource import parsed
from kgen.lower import backward
from kgen.ir.graph import SIDE_BY_SIDE, UPDATED_IN_PLACE, Unsupported, computes_weight, input_index, self_attr as _self_attr, window_means_code
from kgen.frontend.trace import WHOLE_REDUCTIONS, rows_at, takes_rows
from kgen.lower.forward import OPERAND_TYPES, Lowered, lower, split_keeps_infinities
from kgen.ir.ops import cuda_float
from kgen.tune.spec import (ARCH_LIMITS, CUBLAS_COMPUTE_TYPES, FP16X3_FLUSH_KTILES, FP16X3_K_MULTIPLE,
                             FP16X3_TF32X3_STAGES, FP16X3_W_IN_REGISTERS_MAX_ROWS, FUSION_LEVELS,
                             ROUND16_K_MULTIPLE, ROUND16_MATHS, ROUND16_TF32_STAGES, WGMMA_FLUSH_KTILES,
                             Spec, cta_threads, kgen_source_digest, spec_smem_bytes)
from kgen.check.static_checks import StaticCheckError, check_emitted

# The templates and the plain CUDA they include live beside this module.
CODEGEN_DIR = Path(__file__).resolve().parent

# The C type of the GEMM's operands x and w in the extension: float, or the 16-bit type of a
# module in bf16 or fp16 (kernel.cu.j2 defines it from the build's -DKGEN_OPERAND=...; the
# emitted file builds once per dtype it meets: model_new.py.j2, OPERAND_BUILDS).
OPERAND_CTYPE = "kgen_operand_t"
# The C type of the module's parameters and buffers (common.cuh, kgen::Param): the operands' but
# in the build for torch.autocast, where they stay fp32 (the type the epilogue reads them in).
PARAM_CTYPE = OPERAND_TYPES["param"]
# The C type of the GEMM's weight w: the operands' (kgen_operand_t), but float in the build for
# torch.autocast of an fp32 module whose GEMM rounds the fp32 weight itself (-DKGEN_FP32_WEIGHT,
# kernel.cu.j2; autocast_gemm_type).
WEIGHT_CTYPE = "kgen_weight_t"
# torch dtype name -> the extension build's definition of KGEN_OPERAND (float: the default).
OPERAND_BUILDS = {"float32": None, "bfloat16": "__nv_bfloat16", "float16": "__half"}

# The parameters of the extension's C entry point kgen_forward, in order: (name, C type). The
# lists that the CUDA side's ForwardArgs struct, prototype and fill_operands (kernel.cu.j2) and
# the Python side's ctypes signature and call (model_new.py.j2) are written from. `out` is fp32
# or of the module's dtype, as the extension's kgen_output_is_operand_typed_<part>() says.
BASE_ARGS = (
    ("x", f"const {OPERAND_CTYPE}*"), ("w", f"const {WEIGHT_CTYPE}*"), ("out", "void*"), ("workspace", "float*"),
    ("w_split", "float*"), ("w_split_current", "int"), ("M", "int"), ("N", "int"), ("K", "int"), ("training", "int"),
    ("stream", "void*"),
    ("z_out", "float*"),
)
BATCHNORM_ARGS = (
    ("gamma", f"const {PARAM_CTYPE}*"), ("beta", f"const {PARAM_CTYPE}*"), ("running_mean", f"{PARAM_CTYPE}*"),
    ("running_var", f"{PARAM_CTYPE}*"), ("num_batches_tracked", "const long long*"), ("momentum", "float"),
    ("cumulative", "int"), ("eps", "float"),
)


def operand_args(lowered: Lowered) -> list[tuple[str, str]]:
    """The entry's epilogue operands (operand0, ...), each of the type the epilogue reads it in
    (forward.OPERAND_TYPES: a parameter or buffer and the module's input in kgen::Param,
    Dropout's mask in kgen::Operand)."""
    return [(f"operand{k}", f"const {OPERAND_TYPES[n.kind]}*") for k, n in enumerate(lowered.operands)]


def forward_args(lowered: Lowered) -> list[tuple[str, str]]:
    args = list(BASE_ARGS) + operand_args(lowered)
    return args + (list(BATCHNORM_ARGS) if lowered.batchnorm else [])


# The C entry's parameters that _kgen_launch makes (the output, workspace, w's kept split, sizes
# and stream): the custom op of a part takes the others.
LAUNCH_ARGS = ("out", "workspace", "w_split", "w_split_current", "M", "N", "K", "stream", "z_out")
# How _kgen_launch passes each of BASE_ARGS to the C entry (written in BASE_ARGS' order); the
# part's body passes the rest (its operands, BatchNorm's) after them, in forward_args' order.
LAUNCH_VALUES = {"x": "x.data_ptr()", "w": "w.data_ptr()", "out": "out.data_ptr()",
                 "workspace": "None if workspace is None else workspace.data_ptr()",
                 "w_split": "None if w_split is None else w_split.data_ptr()", "w_split_current": "w_split_current",
                 "M": "M", "N": "N", "K": "K",
                 "training": "training", "stream": "stream",
                 "z_out": "None if z_out is None else z_out.data_ptr()"}
# A file whose GEMMs split no w (not fp16x3) hands the entry no split, as these literals.
NO_W_SPLIT_VALUES = {"w_split": "None", "w_split_current": "0"}
# BatchNorm tensors a module may lack (affine=False, track_running_stats=False): optional in the op.
OPTIONAL_TENSORS = ("gamma", "beta", "running_mean", "running_var", "num_batches_tracked")


# The parameters of a part's backward entry kgen_backward_<part>, then its operands (operand0, ...).
# g (g_numel elements) and dz_out (dz for torch's GEMMs, a 16-bit module's) are in the operands'
# type, the column sums grad_cols in the parameters' (entry_backward.cuh, backward_with_io).
BACKWARD_BASE_ARGS = (
    ("x", "const float*"), ("w", "const float*"), ("g", f"const {OPERAND_CTYPE}*"), ("g_numel", "long long"),
    ("z", "const float*"), ("dx", "float*"), ("dw", "float*"), ("grad_cols", f"{PARAM_CTYPE}*"),
    ("workspace", "float*"), ("M", "int"), ("N", "int"), ("K", "int"), ("need_dx", "int"), ("need_dw", "int"),
    ("stream", "void*"), ("bn_training", "int"), ("d_input", "float*"), ("dz_out", f"{OPERAND_CTYPE}*"),
)


def backward_args(lowered: Lowered) -> list[tuple[str, str]]:
    base = list(BACKWARD_BASE_ARGS)
    if lowered.gemv:
        # The matrix-vector rewrite's backward reads x and w, and writes dx and dW, in the
        # module's dtype (kernels/gemv_backward.cuh); every other backward's are fp32.
        typed = {"x": f"const {OPERAND_CTYPE}*", "w": f"const {OPERAND_CTYPE}*", "dx": f"{OPERAND_CTYPE}*",
                 "dw": f"{OPERAND_CTYPE}*"}
        base = [(name, typed.get(name, ctype)) for name, ctype in base]
    return base + operand_args(lowered)


def input_gradient_slot_lines(lowered: Lowered) -> list[str]:
    """C statements pointing each slot of EpilogueParams::d_input (backward.input_gradient_paths)
    into the entry's one d_input buffer: the inputs' gradients one after another, each in its
    input's shape, (M, N) where the stages read it per element (its width is the GEMM's N, which
    the forward checks), else (M, d) as traced (the broadcast tail's N is the traced one), as the
    emitted file's _kgen_input_gradients and native_backward.cpp's kInputGrad split it."""
    reads = {n.attrs["path"]: n for n in lowered.operands if n.kind == "input"}
    lines, per_n, columns = [], 0, 0
    for slot, path in enumerate(backward.input_gradient_paths(lowered)):
        lines.append(f"p.d_input[{slot}] = d_input == nullptr ? nullptr : d_input + static_cast<long long>(M) * "
                     f"({per_n}LL * N + {columns});  // {path}")
        if reads[path].level == "tile":
            per_n += 1
        else:
            columns += int(reads[path].shape[1])
    return lines


def op_gradients(lowered: Lowered) -> dict[str, tuple | None]:
    """The backward's gradient of each input of a part's op that takes one, by name: ("dx",),
    ("dw",), ("row", k, length, operand) row k of the column sums [P][N] (then BatchNorm's dβ and
    dγ rows), its first `length` values (None: all), in the shape of `operand` (None: as it is);
    ("input", slot) the gradient of an input read after the GEMM, d_input's block `slot`
    (backward.input_gradient_paths); None: no gradient flows. What
    the output's gradient does not reach (behind a detach, or computed under no_grad) gets None,
    as torch gives it, not the zeros the kernels compute for it."""
    operands = [f"operand{k}" for k in range(len(lowered.operands))]
    gradient: dict[str, tuple | None] = {"x": ("dx",), "w": ("dw",), "beta": ("row", len(operands), None, None),
                                         "gamma": ("row", len(operands) + 1, None, None)}
    for name, g in zip(operands, backward.operand_gradients(lowered)):
        gradient[name] = g if g is None or g[0] == "input" else (*g, name)
    reached = backward.gradient_leaves(lowered)
    if not any(n.kind == "gemm" for n in reached):
        gradient.update(x=None, w=None)
    if not any(n.kind == "batchnorm" for n in reached):
        gradient.update(gamma=None, beta=None)
    paths = {n.attrs["path"] for n in reached if n.kind in ("param", "input")}
    for name, n in zip(operands, lowered.operands):
        if n.kind in ("param", "input") and n.attrs["path"] not in paths:
            gradient[name] = None
    return gradient


def _gradient_expression(gradient: tuple | None) -> str:
    """An op_gradients entry as the Python vjp computes it (from dx, dw, column_grads and d_inputs,
    d_input split into its inputs' gradients)."""
    if gradient is None:
        return "None"
    if gradient[0] == "input":
        return f"d_inputs[{gradient[1]}]"
    if gradient[0] != "row":
        return {"dx": "dx", "dw": "dw"}[gradient[0]]
    _, row, length, operand = gradient
    rows = f"column_grads[{row}]" if length is None else f"column_grads[{row}, :{length}]"
    return rows if operand is None else f"{rows}.reshape({operand}.shape)"


def _wrapped(values: list[str], width: int = 100) -> list[str]:
    """Comma-separated `values` in lines of at most `width` characters (one value longer than
    that alone), for a call written over several lines: each line but the last ends in a comma."""
    lines: list[str] = []
    for value in values:
        if lines and len(lines[-1]) + len(value) + 2 <= width:
            lines[-1] += f" {value},"
        else:
            lines.append(f"{value},")
    if lines:
        lines[-1] = lines[-1][:-1]
    return lines


def op_part(lowered: Lowered) -> dict:
    """One GEMM part's custom op, from the C entry's argument list: its Python signature (torch
    infers the op schema from the annotations) and the call of _kgen_launch; and its backward op,
    where the part has backward kernels (else why not)."""
    # (and whether the build for torch.autocast runs: decided by the forward, where autocast's
    # state is the caller's, not by the op's body, which a compiled graph may run outside it)
    args = [(name, ctype) for name, ctype in forward_args(lowered) if name not in LAUNCH_ARGS] + [("autocast", "int")]
    names = [name for name, _ in args]

    # Dropout's masks are None in eval mode.
    optional = set(OPTIONAL_TENSORS) | {f"operand{k}" for k, n in enumerate(lowered.operands) if n.kind == "mask"}

    def annotation(name: str, ctype: str) -> str:
        if ctype.endswith("*"):
            return "typing.Optional[torch.Tensor]" if name in optional else "torch.Tensor"
        return {"int": "int", "float": "float"}[ctype]

    reason = backward.unsupported(lowered)
    operands = [f"operand{k}" for k in range(len(lowered.operands))]
    gradient = op_gradients(lowered)
    # The inputs read after the GEMM (the module's, extra ones) that a gradient flows to through
    # that read, in d_input's order (backward.input_gradient_paths).
    inputs = {n.attrs["path"]: f"operand{k}" for k, n in enumerate(lowered.operands) if n.kind == "input"}
    input_operands = [] if reason is not None else [inputs[path] for path in backward.input_gradient_paths(lowered)]
    # The C entry's arguments after BASE_ARGS, as the part's body hands them to _kgen_launch: a
    # tensor the kernels only read, made contiguous and 16-byte aligned first (the body keeps the
    # copy alive until the launch); one they update in place, as it is; by data pointer (None:
    # NULL), the numbers as they are. Written out, not looked up by name on every forward.
    assert [name for name, _ in BASE_ARGS] == list(LAUNCH_VALUES)
    aligned, passed = [], []
    for name, ctype in forward_args(lowered)[len(BASE_ARGS):]:
        if not ctype.endswith("*"):
            passed.append(name)
            continue
        if name not in UPDATED_IN_PLACE:
            aligned.append(f"{name} = _kgen_aligned({name})" if name not in optional else
                           f"{name} = None if {name} is None else _kgen_aligned({name})")
        passed.append(f"{name}.data_ptr()" if name not in optional else f"None if {name} is None else {name}.data_ptr()")
    return {
        "signature": ", ".join(f"{name}: {annotation(name, ctype)}" for name, ctype in args),
        "names": ", ".join(names),
        "aligned": aligned,
        "passed_lines": _wrapped(passed),
        "batchnorm": lowered.batchnorm is not None,
        "no_backward": reason,
        "backward": None if reason else {
            # Every gradient zero (backward.zero_gradients): the op's backward returns zeros, no kernels.
            "zero": backward.zero_gradients(lowered),
            "signature": ", ".join([f"{n}: {annotation(n, 'const float*')}" for n in ["x", "w"] + operands + ["z"]] +
                                   ["need_dx: int", "need_dw: int", "need_dinput: int"]),
            "names": ", ".join(["x", "w"] + operands + ["z"]),
            "call": ", ".join(["x", "w", "z", "need_dx", "need_dw", "need_dinput"] + [f"{n}={n}" for n in operands]
                              + [f"input_operands={tuple(input_operands)!r}"]),
            "params": len(operands),
            "grads": ", ".join(_gradient_expression(gradient.get(name)) for name in names),
            "kept_per_column": backward.kept_per_column(lowered),
            # Floats per row of the core value a broadcast tail reads (kept after z; 0: no tail).
            "core_width": core_width(lowered),
            "need_dinput": " or ".join(f"ctx.needs_input_grad[{names.index(o)}]" for o in input_operands) or "False",
            # The input gradients the backward op returns, one after another in one tensor (empty: none flows).
            "dinput_fake": (f"{input_operands[0]}.new_empty(({' + '.join(f'{o}.numel()' for o in input_operands)},))"
                            if input_operands else "x.new_empty(0)"),
            # d_input split into each input's gradient, in its shape (_kgen_input_gradients)
            "input_operands": ", ".join(input_operands),
        },
    }


# ---- the C++ autograd node of eager training (kernels/native_backward.cpp) ----------------------
NATIVE_SOURCE = CODEGEN_DIR / "kernels" / "native_backward.cpp"
# Where each parameter of a backward entry comes from, by name: one of native_backward.cpp's
# Source codes (a saved tensor's index follows from the name: native_plan). dz_out is null and
# dx, dw and their flags are set for an fp32 module (the entry's GEMMs compute dx and dW), the
# other way round for a 16-bit one (torch's GEMMs read dz): the node asks x's dtype.
NATIVE_SOURCES = {"x": "Saved", "w": "Saved", "z": "Saved", "g": "Grad", "g_numel": "GradNumel", "dz_out": "Dz",
                  "grad_cols": "ColumnGrads", "workspace": "Workspace", "M": "M", "N": "N", "K": "K",
                  "stream": "Stream", "bn_training": "BnTraining", "d_input": "DInput", "dx": "DxOut", "dw": "DwOut",
                  "need_dx": "NeedDx", "need_dw": "NeedDw"}
NATIVE_GRADS = {"dx": "Dx", "dw": "Dw", "row": "ColumnRow", "input": "InputGrad"}


@functools.cache
def native_codes() -> dict[str, dict[str, int]]:
    """native_backward.cpp's enums (Source, Grad) as {enum: {name without its k: code}}: the C++
    source is the one place of the codes the plans carry."""
    text = NATIVE_SOURCE.read_text()
    return {m[1]: {c[1]: int(c[2]) for c in re.finditer(r"\bk(\w+) = (\d+)", m[2])}
            for m in re.finditer(r"enum (\w+) : int64_t \{(.*?)\};", text, re.S)}


def native_plan(lowered: Lowered) -> dict:
    """A part's plan for the C++ autograd node: `inputs`, the op's inputs a gradient may flow to
    (x, w, the operands, BatchNorm's γ and β) and `saved`, what its backward reads (x, w, the
    operands, z), by name; `sources`, each parameter of the C entry as (Source code, saved index,
    name); `grads`, each input's gradient as (Grad code, index, length, saved index of the shape
    it takes), from op_gradients (-1: none, all, as it is)."""
    codes = native_codes()
    operands = [f"operand{k}" for k in range(len(lowered.operands))]
    saved = ["x", "w", *operands, "z"]
    inputs = ["x", "w", *operands] + (["gamma", "beta"] if lowered.batchnorm is not None else [])
    sources = []
    for name, _ in backward_args(lowered):
        source = "Saved" if name.startswith("operand") else NATIVE_SOURCES[name]
        sources.append((codes["Source"][source], saved.index(name) if source == "Saved" else 0, name))
    gradient = op_gradients(lowered)
    grads = []
    for name in inputs:
        g = gradient.get(name)
        if g is None:
            grads.append((codes["Grad"]["None"], 0, -1, -1, name))
        elif g[0] == "row":
            _, row, length, operand = g
            grads.append((codes["Grad"]["ColumnRow"], row, -1 if length is None else length,
                          -1 if operand is None else saved.index(operand), name))
        else:
            grads.append((codes["Grad"][NATIVE_GRADS[g[0]]], saved.index(name) if g[0] == "input" else 0, -1, -1, name))
    # (the node saves the inputs before z and is handed z alone: attach)
    assert saved[:-1] == inputs[:len(saved) - 1], (saved, inputs)
    return {"inputs": tuple(inputs), "saved": tuple(saved), "sources": sources, "grads": grads,
            "column_rows": len(operands) + 2}


def uses_native_backward(spec: Spec, lowered: Lowered) -> bool:
    """Whether the part's eager training runs the C++ autograd node: a part with backward kernels
    (not the matrix-vector rewrite's, whose entry takes no dz and whose outer products the
    node does not know)."""
    # (a prologue's backward returns its dz as dx: the Python node, _kgen_launch_backward)
    return (spec.family != "gemv" and backward.has_kernels(lowered) and not backward.zero_gradients(lowered)
            and not lowered.graph.is_prologue)


def core_width(lowered: Lowered) -> int:
    """Floats per row of a broadcast tail's core value (its N is the traced one: ModelNew checks
    it), 0 without a tail."""
    if not lowered.tail:
        return 0
    return int(eval(lowered.output_width.replace(" / ", " // "), {"N": lowered.traced.out_features}))


def fill_lines(lowered: Lowered) -> list[str]:
    """C statements moving ForwardArgs into the kernels' parameter structs."""
    lines = [f"p.operand[{k}] = a.operand{k};" for k in range(len(lowered.operands))]
    if lowered.batchnorm:
        lines += [f"f.{name} = a.{name};" for name, _ in BATCHNORM_ARGS if name != "cumulative"]
        lines.append("f.cumulative = a.cumulative != 0;")
    return lines


def numel(shape: tuple) -> int:
    count = 1
    for d in shape:
        count *= d
    return count


def _literal(value) -> str:
    """A forward parameter's default or a hyperparameter (None, a bool, a number, a string or a
    tuple of numbers) as Python source that reads back as that value: repr, but float('inf') /
    float('nan') for what repr leaves unnamed."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({repr(value)!r})"
    if isinstance(value, tuple):
        return _tuple_source([_literal(v) for v in value])
    return repr(value)


def forward_params(parts: list[Lowered]) -> str:
    """ModelNew.forward's parameters after x: get_inputs()' tensors after the input
    (extra_input_params), then the reference forward's that kgen traced at their defaults
    (Graph.forward_defaults), with those defaults."""
    return "".join([f", {name}" for name in extra_input_params(parts)] +
                   [f", {name}={_literal(default)}" for name, default in parts[-1].traced.forward_defaults])


def forward_call_args(parts: list[Lowered]) -> str:
    """ModelNew.forward's parameters after x passed on by name (the rows wrapper's call)."""
    return "".join(f", {name}={name}" for name in [*extra_input_params(parts),
                                                   *(name for name, _ in parts[-1].traced.forward_defaults)])


# Names ModelNew.forward's body binds itself (forward_lines, _part_lines): an extra input named so
# by the reference's forward is named input<k> in the file instead.
_FORWARD_LOCALS = frozenset({"self", "x", "w", "n", "bn", "module_input", "autocast", "input_dtype",
                             "changed_submodule", "torch", "training"})


def extra_input_params(parts: list[Lowered]) -> list[str]:
    """ModelNew.forward's names for get_inputs()' tensors after x: the reference forward's own
    (Graph.extra_input_names: `input_tensor` of BertOutput), or input<k> where that name is one
    the body binds itself (x, w, operand0, ...) or a parameter traced at its default."""
    traced = parts[-1].traced
    taken = _FORWARD_LOCALS | {name for name, _ in traced.forward_defaults}
    return [name if name.isidentifier() and not keyword.iskeyword(name) and name not in taken
            and not re.fullmatch(r"(operand|weight)\d+|_kgen.*", name) else f"input{k}"
            for k, name in enumerate(traced.extra_input_names, 1)]


def input_params(parts: list[Lowered]) -> list[str]:
    """The public ModelNew.forward's names for get_inputs()' tensors, as the reference's forward
    names them (`hidden_states, input_tensor`), so that a caller may give them by keyword; input<k>
    for forward(*args) and where the name cannot be one of its parameters (self, a keyword, a
    parameter traced at its default, a name taken twice). That forward reads no name but self and
    its parameters (public_forward), so any other name is free there."""
    traced = parts[-1].traced
    names = [traced.input_name or "input0", *traced.extra_input_names]
    taken = {"self"} | {name for name, _ in traced.forward_defaults}
    out: list[str] = []
    for k, name in enumerate(names):
        if not name.isidentifier() or keyword.iskeyword(name) or name in taken or name in out:
            name = next(n for n in [f"input{k}", *(f"input{k}_{j}" for j in range(len(names)))]
                        if n not in names and n not in taken and n not in out)
        out.append(name)
    return out


def public_forward(parts: list[Lowered]) -> dict | None:
    """ModelNew.forward where the reference names its inputs otherwise than the body does (x,
    then extra_input_params): a forward under the reference's names (input_params) that passes
    them on to the body, _kgen_forward; None where the names are the body's own."""
    public, body = input_params(parts), ["x", *extra_input_params(parts)]
    if public == body:
        return None
    defaults = [name for name, _ in parts[-1].traced.forward_defaults]
    return {"params": ", ".join(public + [f"{name}={_literal(d)}" for name, d in parts[-1].traced.forward_defaults]),
            "args": ", ".join(public + [f"{name}={name}" for name in defaults]),
            "names": ", ".join(public), "body_names": ", ".join(body)}


def input_labels(parts: list[Lowered]) -> dict[str, str]:
    """The body's name of each input after x -> the public forward's (input_params): what the
    checks' messages call it."""
    return dict(zip(extra_input_params(parts), input_params(parts)[1:]))


def rows_input(spec: Spec) -> str:
    """How the emitted forward's docstring names an input of more dimensions, (..., features),
    that the file takes as its rows: the reference's own (Reference.rows_of), or one its module
    takes as eager's does where get_inputs() gives (batch, features) (trace.takes_rows); ""
    where the file takes (batch, features) alone."""
    ref = spec.reference()
    if ref.rows_of is not None:
        return f"{ref.rows_text()}, {'x'.join(map(str, ref.rows_of))} in its get_inputs()"
    if takes_rows(ref):
        return f"(..., {int(ref.input.shape[1])}) wherever called so (get_inputs(): {'x'.join(map(str, ref.input.shape))})"
    return ""


def token_input(spec: Spec) -> str:
    """How the emitted forward's docstring names a (batch, tokens, features) input of which the
    module's first GEMM reads one token (Reference.token_of); "" for any other input."""
    ref = spec.reference()
    if ref.token_of is None:
        return ""
    return f"(batch, tokens, {ref.token_of[2]}), {'x'.join(map(str, ref.token_of))} in its get_inputs()"


def rows_return_lines(at: int) -> list[str]:
    """The rows forward's return of `out`, the output on x's rows, reshaped back to x's leading
    sizes, as trace.rows_output does: the rows at the output's dimension `at` (after the sizes 1
    that a parameter of more dimensions broadcast them to; 0 for a (..., K) reference's rows
    alone)."""
    if not at:
        return ["return out if out.dim() == 0 else out.reshape((*x.shape[:-1], *out.shape[1:]))"]
    return [f"# (the rows are the output's dimension {at}, after the sizes 1 a parameter of more",
            "# dimensions broadcast them to: kgen.frontend.trace.rows_output)",
            "return out if out.dim() == 0 else out.reshape(",
            f"    (1,) * max(0, {at + 1} - (x.dim() - 1)) + (*x.shape[:-1], *out.shape[{at + 1}:]))"]


def _tuple_source(items: list[str]) -> str:
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


def _attribute_read(path: str) -> str:
    """Python that reads the attribute at dotted `path` (multiplier, gn.eps, net.1.negative_slope)
    of ModelNew on every forward, cheaply: a submodule through _modules (a dict lookup, where
    nn.Module.__getattr__ costs ~0.3 us a step), so a submodule replaced since is read too."""
    *modules, name = path.split(".")
    owner = "self" + "".join(f"._modules[{m!r}]" for m in modules)
    plain = name.isidentifier() and not keyword.iskeyword(name)   # (setattr(self, "lambda", ...) makes one)
    return f"{owner}.{name}" if plain else f"getattr({owner}, {name!r})"


def hyperparameter_lines(read: list[tuple[str, object]], reads: dict | None = None) -> list[str]:
    """The forward's check of the module's attributes that the trace baked into the kernels
    (Graph.hyperparameters): a model built with other constructor arguments, or changed since,
    is refused, naming the traced values, rather than computed with them. (The message is a
    constant: torch.compile traces no float's repr, and shows a constant message as raised.)
    `reads`: Graph.hyperparameter_reads, for a setting inside an attribute's containers."""
    if not read:
        return []
    reads = reads or {}
    attribute_reads = [_attribute_read(reads[path][0]) + reads[path][1] if path in reads else _attribute_read(path)
                       for path, _ in read]
    now = _tuple_source(attribute_reads)
    traced = _tuple_source([_literal(value) for _, value in read])
    names = ", ".join(f"{path}={value!r}" for path, value in read)
    message = (f"this ModelNew was synthesized for {names} (its kernels compute with these values), and "
               f"this model's differ: generate it again from a reference built with its values (kgen "
               f"generate --set NAME=VALUE sets a module-level constant of the reference)")
    if len(f"if {now} != {traced}:") > 100:   # (one attribute a line)
        return (["if ("] + [f"        {r}," for r in attribute_reads] + [f") != {traced}:"]
                + [f"    raise ValueError({message!r})"])
    return [f"if {now} != {traced}:", f"    raise ValueError({message!r})"]


def called_modules_literal(called: list[tuple[str, str | None]]) -> list[tuple[str, str]]:
    """_KGEN_CALLED_MODULES' rows as Python source: each submodule's path as its _modules keys (a
    tuple), its class (trace._class_source; None: hooks alone are checked)."""
    return [(_tuple_source([repr(name) for name in path.split(".")]), cls or "None") for path, cls in called]


def submodule_lines(called: list[tuple[str, str | None]]) -> list[str]:
    """The forward's check that the submodules the reference's forward calls are the ones traced
    (_kgen_changed_submodule): ModelNew calls none of them, so a hook given to one, or one
    replaced by another class, would be passed over in silence."""
    if not called:
        return []
    return ["changed_submodule = _kgen_changed_submodule(self)", "if changed_submodule is not None:",
            "    raise RuntimeError(changed_submodule)"]


def device_context_lines(parts: list[Lowered], entry: str) -> list[str]:
    """The first lines of ModelNew.forward's body (`entry`, the method they are in): under torch's
    device context alone (torch.set_default_device, `with torch.device(...)`), its Python
    __torch_function__ would run on each of the forward's torch calls (on an H200, KernelBench 12
    in bf16 took 0.40 ms so, 0.23 without), so the body runs again with torch function modes off,
    as every tensor it makes names its device."""
    return ["if not torch.compiler.is_compiling() and _KGEN_FUNCTION_MODE() and not _kgen_recording_function_mode():",
            "    with torch._C.DisableTorchFunction():",
            f"        return {entry}(x{forward_call_args(parts)})"]


def forward_lines(parts: list[Lowered], sixteen_bit: bool = False) -> list[str]:
    """ModelNew.forward's body after device_context_lines: check the input and every tensor the
    kernels read, then call each GEMM part's entry point in turn (a part's output is the next
    part's x). `sixteen_bit`: the file has 16-bit builds, which run inside torch.autocast (an
    fp32 module's too), the output then handed over in eager's dtype there
    (_kgen_autocast_output, from the reasons kgen.frontend.autocast read for it to be fp32)."""
    lines = submodule_lines(parts[-1].traced.called_modules)
    lines += hyperparameter_lines(parts[-1].traced.hyperparameters, parts[-1].traced.hyperparameter_reads)
    for name, default in parts[-1].traced.forward_defaults:
        # (kgen traced the forward with this parameter at its default, as get_inputs() leaves it)
        # (`is` for None and bools; a NaN default is matched by NaN alone, which != never is)
        if default is None or isinstance(default, bool):
            differs = f"{name} is not {default!r}"
        elif isinstance(default, float) and math.isnan(default):
            differs = f"{name} == {name}"
        else:
            differs = f"{name} != {_literal(default)}"
        message = (f"this ModelNew was synthesized for {name}={default!r}, the reference forward's default "
                   "(get_inputs() leaves it there); generate it again from a reference whose forward "
                   "computes what you give it")
        lines += [f"if {differs}:", f"    raise ValueError({message!r})"]
    for d in parts[-1].traced.dropouts:
        if d.get("reproduced") and d["path"]:
            continue   # its mask is drawn by the part that reads it (_part_lines)
        if d.get("reproduced"):
            # F.dropout(x, p, training=self.training): the trace saw the flag as a bool, so
            # which module's mode it follows is unknown; the mask follows the model's
            # (ir.dropout_training), which is exact whenever the modules agree.
            mode = "any(m.training != self.training for m in self.modules())"
            message = (f"F.dropout(p={d['p']:g}) (line {d['line']} of the reference) follows a module's "
                       "training flag, and this model's modules are in different modes; kgen follows "
                       "the model's own (self.training). Put every module in one mode")
        else:
            mode = (_self_attr(f"{d['path']}.training") if d["path"]
                    else "any(m.training for m in self.modules())")
            message = (f"{d['name']} (line {d['line']} of the reference) draws at random in training mode; kgen "
                       f"does not reproduce {d['why']}. Use the module in eval mode (.eval()), where it is "
                       f"{d['in_eval']}")
        lines += [f"if {mode}:", f"    raise RuntimeError({message!r})"]
    # Each weight is read once: a parametrized one (weight_norm, spectral_norm) is computed on
    # every access, and spectral_norm's power iteration moves its buffers each time, as it does
    # once per forward in the reference.
    lines += [f"weight{k} = {_weight_nk(low.graph.gemm, k)}" for k, low in enumerate(parts)
              if not low.graph.is_prologue]
    # The first GEMM's weight (after a prologue's ops on the input, which have none): x's width and
    # the module's dtype are checked against it.
    first = f"weight{first_gemm_part(parts)}"
    if sixteen_bit:
        lines.append("input_dtype = x.dtype")
    reads_input = any(n.kind == "input" and not input_index(n) for low in parts for n in low.operands)
    if reads_input:
        lines.append("module_input = x  # read again after the GEMM (a residual): as it comes, not converted")
    extras = extra_input_params(parts)
    labels = input_labels(parts)
    for k, name in enumerate(extras, 1):
        # (as x is checked: a tensor of x's device and dtype, with x's rows; its width by the part that reads it)
        lines.append(f"_kgen_checked_extra_input({name}, x, {labels[name]!r}, {k + 1}, {input_params(parts)[0]!r})")
    lines += [f"x = _kgen_checked_input(x, {first})",
              "autocast = int(_kgen_autocast_build(x))  # (the ops' build: its kernels read the parameters in fp32)"]
    if parts[0].graph.is_prologue and sixteen_bit:
        # Inside torch.autocast eager runs LayerNorm and the like in fp32 (on an fp32 module's fp32
        # input, rounded once where the Linear converts their output), which the build for
        # autocast, whose stages write fp32 and read x converted, does not reproduce: refused.
        lines_read = sorted({n.line for n in parts[0].graph.live() if n.line})
        message = (f"this ModelNew's ops on its input before the first GEMM (line{'s' if len(lines_read) > 1 else ''} "
                   f"{', '.join(map(str, lines_read))} of the reference) do not run inside torch.autocast (eager runs "
                   "them in fp32 there); call it outside autocast, with the module and input in one dtype")
        lines += ["if autocast:", f"    raise RuntimeError({message!r})"]
    sizes = parts[-1].traced.sizes_read
    if sizes:
        # The trace read a feature size as a number and baked it in: these sizes only.
        line, text = sizes[0]
        # (the GEMMs' widths: a pooled weight's rows are the pooling's width, rewrite.pool_as_weight)
        widths = [parts[0].traced.in_features] + [low.graph.out_features for low in parts
                                                   if not low.graph.is_prologue]
        now = ["x.shape[1]"] + [f"weight{k}.shape[0]" for k, low in enumerate(parts) if not low.graph.is_prologue]
        message = (f"this ModelNew was synthesized for the feature sizes {tuple(widths)} (line {line} of the "
                   f"reference, `{text}`, reads a size as a number, which the trace baked in); generate it "
                   "again for other sizes")
        lines += [f"if ({', '.join(now)},) != {tuple(widths)}:", f"    raise ValueError({message!r})"]
    for k, low in enumerate(parts):
        halves = low.graph.halves
        if halves and not sizes:
            # (GLU's halves of N: an odd N has no two halves of one width; torch's chunk and glu
            # refuse it too, and the kernels would halve N - 1)
            h = halves[0]
            message = (f"the reference halves the {{}} features of its GEMM (line {h.line}, `{h.text}`); "
                       "an odd number has no two halves of one width")
            lines += [f"if weight{k}.shape[0] % 2:",
                      f"    raise ValueError({message!r}.format(weight{k}.shape[0]))"]
    if reads_input:
        # (in the parameters' dtype: x's, or fp32 in the build for autocast, where eager adds
        # the fp32 input unconverted)
        lines.append("module_input = module_input.to(_kgen_param_dtype(x))")
    lines += [f"{name} = {name}.to(_kgen_param_dtype(x))" for name in extras]
    for k, lowered in enumerate(parts):
        if lowered.graph.is_prologue:
            lines.append(f"# part {k}: the ops on the input before the first GEMM (no GEMM); its output is "
                         f"part {k + 1}'s x")
        elif len(parts) > 1:
            then = f"; its output is part {k + 1}'s x" if k + 1 < len(parts) else ""
            lines.append(f"# part {k}: GEMM {lowered.graph.in_features} -> {lowered.graph.out_features} "
                         f"and its epilogue{then}")
        keeps_z = backward.has_kernels(lowered)
        call = _part_lines(lowered, f"weight{k}", lines, keeps_z, extras, labels)
        op = f"_kgen_part_call({k}, {', '.join(call)})"
        last = k + 1 == len(parts)
        if keeps_z and not lowered.batchnorm:
            lines += [f"x, _ = {op}"] + (["return x"] if last else [])
        elif lowered.batchnorm:
            lines += [f"x, {'_, ' if keeps_z else ''}running_mean, running_var = {op}",
                      f"_kgen_store_running_stats({_self_attr(lowered.batchnorm)}, bn, running_mean, running_var"
                      f"{_counts_arg(lowered)})"]
            lines += ["return x"] if last else []
        else:
            lines.append(f"{'return' if last else 'x ='} {op}")
    tail = parts[-1].graph.output_tail
    if tail:
        method, line, text, _ = tail
        assert lines[-1].startswith("return ")
        value = lines.pop()[len("return "):]
        if value != "x":
            lines.append(f"x = {value}")
        reduces = method in WHOLE_REDUCTIONS.values()   # (else a view or squeeze of the output)
        # (rounded to the module's dtype where the kernels kept the rows' sums in fp32, Graph.tail_rounds;
        # inside torch.autocast _kgen_autocast_output gives the output eager's dtype there)
        dtype = f"x.dtype if autocast else {first}.dtype" if sixteen_bit else None
        lines += [f"# line {line} of the reference, `{text}`: torch's own .{method}() of the kernel's "
                  f"{'per-row values' if reduces else 'output'}", f"return {parts[-1].graph.tail_code('x', dtype)}"]
    if not backward.gradient_leaves(parts[-1]):
        # The reference's output carries no gradient (detached, or computed under no_grad): nor
        # does ModelNew's, so that a backward through it raises as the reference's does.
        value = lines.pop()[len("return "):]
        lines += ["# the reference's output has no gradient (a detach or no_grad before it): nor has this one",
                  f"return ({value}).detach()" if not value.isidentifier() else f"return {value}.detach()"]
    if sixteen_bit:
        value = lines.pop()[len("return "):]
        lines.append(f"return _kgen_autocast_output({value}, {first}, input_dtype, {parts[-1].traced.autocast_output!r})")
    return lines


def first_gemm_part(parts: list) -> int:
    """The index of the first part with a GEMM (1 after a prologue, else 0); `parts`: Lowered or Graph."""
    graphs = [getattr(p, "graph", p) for p in parts]
    return next(k for k, g in enumerate(graphs) if not g.is_prologue)


def _weight_nk(gemm, part: int) -> str:
    """Python for the GEMM's weight as (out, in): the module's tensor, its transpose (a view)
    where the module stores it (in, out) and writes x @ W, or the call of the method that
    computes it where the forward does (weight_methods)."""
    if gemm.attrs.get("weight_code"):
        return f"self._kgen_weight{part}()"
    return _self_attr(gemm.attrs["weight"]) + (".t()" if gemm.attrs.get("stored_kn") else "")


def weight_methods(parts: list[Lowered]) -> list[dict]:
    """ModelNew's methods that compute a GEMM weight the reference's forward computes from its
    parameters (F.linear(x, self.weight * self.scale), F.normalize(self.prototypes, dim=1)):
    torch's own ops, as torch.fx wrote them from the trace, so that autograd carries the
    weight's gradient from the file's backward to the parameters."""
    out = []
    for k, low in enumerate(parts):
        gemm = low.graph.gemm
        if gemm.attrs.get("weight_code"):
            doc = gemm.attrs.get("weight_doc") or (
                f"GEMM {k}'s weight, (out, in) and contiguous, as the reference computes it:\n"
                f"{gemm.attrs['weight']} (torch's ops, as torch.fx wrote them from the trace).")
            out.append({"name": f"_kgen_weight{k}", "doc": doc.splitlines(),
                        "lines": list(gemm.attrs["weight_code"])})
    return out


def _counts_arg(lowered: Lowered) -> str:
    """`, counts=False` where the module's BatchNorm is F.batch_norm on its tensors (it leaves
    num_batches_tracked alone, where nn.BatchNorm1d counts the batch)."""
    return "" if lowered.graph.batchnorms[0].attrs.get("counts", True) else ", counts=False"


def _sequence_arg(lowered: Lowered) -> str:
    """`, sequence=True` where the module's BatchNorm1d reads a (B, N, S) value, h.transpose(1, 2)
    of a forward that reads its input's leading sizes (torch's batch-1 error names (1, N, 1))."""
    return ", sequence=True" if lowered.graph.batchnorms[0].attrs.get("sequence") else ""


def _part_lines(lowered: Lowered, w_nk: str, lines: list[str], keeps_z: bool, extras: list[str] = (),
                labels: dict[str, str] | None = None) -> list[str]:
    """Append the checks of one part's weight (read (out, in) into the local `w_nk`) and
    operands to `lines`; return its op call's arguments. A part with backward kernels keeps z
    when autograd will want its backward. `extras`: the forward's names of get_inputs()'
    tensors after x (extra_input_params); `labels`: what the messages call them (input_labels)."""
    gemm = lowered.graph.gemm
    weight = gemm.attrs["weight"]
    if lowered.graph.is_prologue:
        # No GEMM: an empty (in_features, 0) tensor in w's place gives the entry its N (= K), and
        # no kernel reads it (kernels/forward.cuh, kPrologue).
        lines.append("w = x.new_empty((x.shape[1], 0))  # (a prologue has no weight: N is x's width)")
    else:
        lines.append(f"w = _kgen_checked_param({w_nk}, x, (x.shape[1] * {w_nk}.shape[0],), {weight!r}, autocast, operand=True)")
    if gemm.attrs.get("stored_kn"):
        lines.append(f"w = w.contiguous()  # {weight} is stored (in, out) (x @ W): the GEMM reads it (out, in)")
    lines.append("n = w.shape[0]")
    if lowered.tail:
        # The broadcast tail's shape and strides are the traced ones (lower._tail_struct).
        n = lowered.traced.out_features
        lines += [f"if n != {n}:",
                  f"    raise ValueError(f'this ModelNew broadcasts its output for {n} features "
                  "(its tail was generated for them); the module has {n}')"]
    call = ["x", "w"]
    if lowered.batchnorm:
        lines.append(f"bn = _kgen_batchnorm_args({_self_attr(lowered.batchnorm)}, x, n, {lowered.batchnorm!r}, autocast"
                     f"{_counts_arg(lowered)}{_sequence_arg(lowered)})")
    else:
        call.append("training=0")
    for k, node in enumerate(lowered.operands):
        path = node.attrs["path"]
        if node.kind == "mask":
            # torch draws the mask exactly as the reference's dropout of this (M, N) value does:
            # the draw depends on the generator, numel, p and the vectorization (a fresh
            # contiguous tensor, as the reference's GEMM output is), not on the values; the
            # result is ones * mask * scale = mask * scale, which the epilogue multiplies by.
            mode = _self_attr(f"{node.attrs['module']}.training") if node.attrs["module"] else "self.training"
            lines += [f"# Dropout(p={node.attrs['p']:g}), line {node.line}: torch's own mask in training mode",
                      f"operand{k} = torch.nn.functional.dropout(torch.ones(x.shape[0], n, dtype=x.dtype, device=x.device), "
                      f"{node.attrs['p']!r}, True) if {mode} else None"]
            call.append(f"operand{k}=operand{k}")
            continue
        if node.kind == "input" and input_index(node):
            name, width = extras[input_index(node) - 1], node.shape[1]
            label = (labels or {}).get(name, name)
            if node.level == "tile":   # read at m * N + n by the stages: N is its width
                lines += [f"if {name}.shape[1] != n:",
                          f"    raise ValueError(f'this ModelNew reads {label} per element as a (batch, {{n}}) "
                          f"value; got {{{name}.shape[1]}} features')"]
            else:
                lines += [f"if {name}.shape[1] != {width}:",
                          f"    raise ValueError(f'this ModelNew reads {label} of {width} features after the GEMM "
                          f"(its kernels were generated for them); got {{{name}.shape[1]}}')"]
            lines.append(f"operand{k} = {name}")
            call.append(f"operand{k}=operand{k}")
            continue
        if node.kind == "input":
            k_in = node.shape[1]
            if node.level == "tile":   # read at m * N + n by the stages: N is its width
                lines += ["if n != module_input.shape[1]:",
                          "    raise ValueError(f'this ModelNew reads its input per element as a (batch, {n}) "
                          "value; got {module_input.shape[1]} features')"]
            lines += [f"if module_input.shape[1] != {k_in}:",
                      f"    raise ValueError(f'this ModelNew reads its input of {k_in} features again "
                      "after the GEMM (its kernels were generated for them); got {module_input.shape[1]}')",
                      f"operand{k} = module_input"]
            call.append(f"operand{k}=operand{k}")
            continue
        numels = {"col": "(n,)", "scalar": "(1,)"}.get(node.level) or f"({numel(node.attrs['shape'])},)"
        # (a bool buffer, a condition: 1 and 0 in the module's dtype, as the kernels read operands)
        value = _self_attr(path) + (".to(x.dtype)" if node.attrs.get("bool") else "")
        if "pool" in node.attrs:   # averaged over the windows W's rows are (rewrite.pool_as_weight)
            value = window_means_code(value, *node.attrs["pool"])
        lines.append(f"operand{k} = _kgen_checked_param({value}, x, {numels}, {path!r}, autocast)")
        call.append(f"operand{k}=operand{k}")
    if lowered.batchnorm:
        call.append("**bn")
    call.append("autocast=autocast")
    if keeps_z:
        tensors = ", ".join(["x", "w"] + [f"operand{k}" for k in range(len(lowered.operands))] +
                            (['bn["gamma"]', 'bn["beta"]'] if lowered.batchnorm else []))
        call.append(f"keep_z=_kgen_keeps_z({tensors})")
    return call


def out_shape(lowered: Lowered) -> str:
    """The output's shape, as Python in M and N."""
    if lowered.tail:
        return ", ".join(map(str, lowered.output_shape)) + ("," if len(lowered.output_shape) == 1 else "")
    if lowered.output_level == "rowflat":
        return "M,"
    width = lowered.output_width.replace(" / ", " // ")
    return f"M, {width}"


_CTYPES = {"int": "ctypes.c_int", "long long": "ctypes.c_longlong", "float": "ctypes.c_float"}


def ctypes_type(ctype: str) -> str:
    """The ctypes type a C parameter is passed as (pointers and the stream as addresses)."""
    return "ctypes.c_void_p" if ctype.endswith("*") else _CTYPES[ctype]


@dataclasses.dataclass(frozen=True)
class KernelNeeds:
    """What a translation unit (or one GEMM part of it) uses of the kernel library: the GEMM
    family, whether it builds for 16-bit modules too, and which parts' kinds of kernels it runs."""

    family: str           # simt, mma, wgmma, cublas or gemv (spec.gemm_family)
    half: bool = False    # 16-bit builds: the wgmma family's half GEMM (half_gemm_type)
    backward: bool = False  # backward kernels (kgen/lower/backward.py)
    gemv: bool = False    # the matrix-vector rewrite (kgen/ir/rewrite.py)
    constant: bool = False  # an output that rewrites made a constant
    eager_sums: bool = False  # row sums in eager's order (the cuBLAS fp32 GEMM's files)
    fp16x3: bool = False  # the wgmma GEMM on three fp16 products (a part's forward: gemm_type)
    round16: bool = False  # the wgmma GEMM on bf16 / fp16 products of fp32 operands (a part's forward)


@dataclasses.dataclass(frozen=True)
class LibraryFile:
    """A file of kgen/codegen/kernels/: the files it builds on (inlined before it) and whether a
    translation unit or part with these KernelNeeds uses it."""

    name: str
    after: tuple
    used: typing.Callable[[KernelNeeds], bool]


def _always(needs: KernelNeeds) -> bool:
    return True


# The one place that says which kernel code an emitted file inlines, in the order it inlines it
# (each file after those it builds on): every file of the kernel library with the variants that
# use it, so that a file holds only its variant's kernels (a cuBLAS file no kgen GEMM and no
# backward, a wgmma file no SIMT or mma.sync GEMM, a file without a rewrite none of the
# rewrites' kernels). The headers include nothing of each other: the emitted file is one
# translation unit, and `after` (checked by selected_files) is the order its parts need.
# mma_detail.cuh is the mma.sync family's loader, swizzle, ldmatrix and tf32 helpers, which the
# wgmma GEMMs share; the warp-specialized wgmma GEMM falls back to gemm_wgmma.cuh's kernel when
# TMA cannot load x or w and hands batches of at most 16 rows to gemm_skinny.cuh's; a wgmma file
# builds per dtype (fp32, bf16, fp16), hence its half GEMM; the fp16x3 GEMM runs the half GEMM's
# fp16 wgmma instructions, the round16 one (fp32 operands) its bf16 or fp16 ones.
KERNEL_LIBRARY = (
    LibraryFile("common.cuh", (), _always),
    LibraryFile("stages.cuh", ("common.cuh",), _always),
    LibraryFile("eager_sum.cuh", ("stages.cuh",), lambda n: n.eager_sums),
    LibraryFile("gemv.cuh", ("stages.cuh",), lambda n: n.gemv),
    LibraryFile("constant.cuh", ("common.cuh",), lambda n: n.constant),
    LibraryFile("mma_detail.cuh", ("common.cuh",), lambda n: n.family in ("mma", "wgmma")),
    LibraryFile("gemm_simt.cuh", ("common.cuh",), lambda n: n.family == "simt"),
    LibraryFile("gemm_mma.cuh", ("mma_detail.cuh",), lambda n: n.family == "mma"),
    LibraryFile("gemm_wgmma.cuh", ("mma_detail.cuh",), lambda n: n.family == "wgmma"),
    LibraryFile("gemm_skinny.cuh", ("mma_detail.cuh",), lambda n: n.family == "wgmma"),
    LibraryFile("gemm_wgmma_ws.cuh", ("gemm_wgmma.cuh", "gemm_skinny.cuh"), lambda n: n.family == "wgmma"),
    LibraryFile("gemm_wgmma_half.cuh", ("gemm_wgmma_ws.cuh",), lambda n: n.half or n.fp16x3 or n.round16),
    LibraryFile("gemm_wgmma_f16x3.cuh", ("gemm_wgmma_half.cuh",), lambda n: n.fp16x3),
    LibraryFile("gemm_wgmma_round16.cuh", ("gemm_wgmma_half.cuh",), lambda n: n.round16),
    LibraryFile("backward.cuh", ("stages.cuh",), lambda n: n.backward),
    LibraryFile("gemv_backward.cuh", ("gemv.cuh", "backward.cuh"), lambda n: n.gemv and n.backward),
    LibraryFile("cublas_gemm.cuh", (), lambda n: n.family == "cublas"),
)
# The files each GEMM part inlines in its own namespace (after its kgen_cfg), by that part's
# needs: a part with backward kernels gets the entry points that keep z and run them.
PART_LIBRARY = (
    LibraryFile("forward.cuh", ("stages.cuh",), _always),
    LibraryFile("entry.cuh", ("forward.cuh",), _always),
    # kgen's Hopper GEMMs read x and w by TMA, in whole 16-byte rows: the entry pads a K off them
    LibraryFile("pad_k.cuh", ("entry.cuh",), lambda n: n.family == "wgmma"),
    LibraryFile("entry_backward.cuh", ("entry.cuh", "backward.cuh"), lambda n: n.backward),
)


def kernel_needs(spec: Spec, parts: list[Lowered] | None = None) -> KernelNeeds:
    """What the spec's translation unit uses (of `parts`, a subset of its lowered parts: what
    those parts use)."""
    parts = lowered_parts(spec) if parts is None else parts
    return KernelNeeds(
        family=spec.family,
        half=half_gemm_type(spec) is not None,
        backward=any(backward.has_kernels(low) for low in parts),
        gemv=any(low.gemv for low in parts),
        constant=any(low.constant is not None for low in parts),
        eager_sums=any(low.eager_sums for low in parts),
        fp16x3=any(runs_fp16x3(spec, low.graph.in_features) for low in parts if not low.graph.is_prologue),
        # (a part's forward on fp32 operands, or the build for torch.autocast's: autocast_gemm_type)
        round16=any(runs_round16(spec, low.graph.in_features) for low in parts if not low.graph.is_prologue)
        or autocast_gemm_type(spec) is not None,
    )


def selected_files(library: tuple, needs: KernelNeeds, before: tuple = ()) -> list[str]:
    """The files of `library` that `needs` uses, in order; each file's `after` must be among
    them or `before` (the files already inlined), else the table above is wrong."""
    chosen = [f for f in library if f.used(needs)]
    seen = list(before)
    for f in chosen:
        missing = [d for d in f.after if d not in seen]
        if missing:
            raise AssertionError(f"{f.name} builds on {', '.join(missing)}, which is not inlined before it "
                                 "(generator.KERNEL_LIBRARY)")
        seen.append(f.name)
    return [f.name for f in chosen]


MMA_MATH_ENUMS = {"tf32x3": "kTF32x3", "tf32": "kTF32", "bf16": "kBF16"}
DEFAULT_OUTPUT_DIR = Path("generated")

_ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(str(CODEGEN_DIR / "templates")),
    undefined=jinja2.StrictUndefined,
    keep_trailing_newline=True,
    autoescape=False,
)


def kernel_source(name: str) -> str:
    """A file of the kernel library, ready to inline: the emitted file holds one translation
    unit, so the include guards of the separate files have nothing to guard."""
    text = (CODEGEN_DIR / "kernels" / name).read_text()
    return text.replace("#pragma once\n", "").strip() + "\n"


def runs_fp16x3(spec: Spec, k: int | None) -> bool:
    """Whether a GEMM of the spec that runs at K = k (None: any K, the backward's) is the fp16x3
    one: a forward GEMM whose K is a multiple of FP16X3_K_MULTIPLE; the others of an fp16x3
    variant run tf32x3 on the same tile."""
    return spec.math == "fp16x3" and k is not None and k > 0 and k % FP16X3_K_MULTIPLE == 0


def runs_round16(spec: Spec, k: int | None) -> bool:
    """Whether a GEMM of the spec that runs at K = k (None: any K, the backward's) is the wgmma
    bf16 / fp16 one (kernels/gemm_wgmma_round16.cuh): a forward GEMM whose K is a multiple of
    ROUND16_K_MULTIPLE; the others of a wgmma bf16 / fp16 variant run tf32 (as accurate as fp16's
    products or more, as fast as their tile allows)."""
    return (spec.family == "wgmma" and spec.math in ROUND16_MATHS and k is not None and k > 0
            and k % ROUND16_K_MULTIPLE == 0)


def runs_fp16_products(spec: Spec) -> bool:
    """Whether a forward GEMM of the spec runs fp16 products of fp32 operands (a wgmma fp16 part
    at a K the round16 GEMM takes), whose operands then have fp16's range: what the header and
    `kgen generate` say of it."""
    return spec.math == "fp16" and any(runs_round16(spec, low.graph.in_features) for low in lowered_parts(spec))


def gemm_type(spec: Spec, k: int | None = None) -> str:
    """The GEMM's C++ type. k: the K it always runs at (a part's forward GEMM: the module's
    in_features), where that decides what it compiles; None: any K (the backward's GEMMs)."""
    t = spec.tile
    if spec.family == "wgmma" and spec.math == "fp16x3":
        if runs_fp16x3(spec, k):
            return (f"kgen::WgmmaWsF16x3Gemm<{t.bm}, {t.bn}, {t.stages}, {FP16X3_FLUSH_KTILES}, {t.group_m}, "
                    f"{FP16X3_W_IN_REGISTERS_MAX_ROWS}>")
        spec = spec.replace(math="tf32x3", tile=dataclasses.replace(t, stages=FP16X3_TF32X3_STAGES))
        t = spec.tile
    if spec.family == "wgmma" and spec.math in ROUND16_MATHS:
        if runs_round16(spec, k):
            return f"kgen::WgmmaWsRound16Gemm<{ROUND16_MATHS[spec.math]}, {t.bm}, {t.bn}, {t.stages}, {t.group_m}>"
        spec = spec.replace(math="tf32", tile=dataclasses.replace(t, stages=ROUND16_TF32_STAGES))
        t = spec.tile
    if spec.family == "simt":
        return f"kgen::SimtGemm<{t.bm}, {t.bn}, {t.bk}, {t.wm}, {t.wn}, {t.tm}, {t.tn}, {t.group_m}>"
    if spec.family == "mma":
        return (f"kgen::MmaGemm<kgen::MathMode::{MMA_MATH_ENUMS[spec.math]}, {t.bm}, {t.bn}, {t.bk}, "
                f"{t.wm}, {t.wn}, {t.stages}, {t.group_m}>")
    if spec.family == "wgmma":
        # A forward GEMM (its K given) never needs the fallback: the C entry pads a K that TMA cannot
        # read (K % 4 != 0) with zeros (kernels/entry.cuh, gemm_k). Not compiled.
        fixed_k = "" if k is None else ", false"
        return (f"kgen::WgmmaWsGemm<kgen::MathMode::{MMA_MATH_ENUMS[spec.math]}, {t.bm}, {t.bn}, "
                f"{t.stages}, {WGMMA_FLUSH_KTILES}, {t.group_m}{fixed_k}>")
    # (A part that a rewrite left without a GEMM names ExternalGemm: never launched.)
    return "kgen::CublasGemm" if spec.family == "cublas" else "kgen::ExternalGemm"


def fp32_casts(spec: Spec) -> list:
    """The casts to float32 the module's forward names (Graph.fp32_casts): its file runs fp32
    modules only (in a 16-bit module torch computes on in float32 after them)."""
    return [cast for part in spec.graph().parts for cast in part.fp32_casts]


def fp32_only_reason(spec: Spec) -> str:
    """Why the file runs fp32 modules only, for its error and the CLI's note."""
    casts = fp32_casts(spec)
    if casts:
        line, text, *why = casts[0]
        if why:   # (another float32 fact than a cast: Tracer.nan_to_num)
            return f"line {line} of the reference (`{text}`): {why[0]}; run the module in float32"
        return (f"the reference casts to float32 in its forward (line {line}: `{text}`), so in a 16-bit "
                "module torch computes on in float32, which kgen's 16-bit build does not; run the module "
                "in float32")
    return "`kgen generate --dtype bf16` (or fp16) writes a file for a 16-bit module"


# The families whose files run bf16 and fp16 modules too, each in a build of its own: kgen's
# Hopper wgmma GEMM (its half GEMM, half_gemm_type) and the matrix-vector rewrite (no GEMM: x and
# w read in the module's dtype, kernels/gemv.cuh).
SIXTEEN_BIT_FAMILIES = ("wgmma", "gemv")


def sixteen_bit_builds(spec: Spec) -> bool:
    """Whether the variant's file runs bf16 / fp16 modules (else fp32 ones only: fp32_only_reason)."""
    return spec.family in SIXTEEN_BIT_FAMILIES and not fp32_casts(spec)


def half_gemm_type(spec: Spec) -> str | None:
    """The GEMM of the spec's tile on 16-bit operands (a module in bf16 or fp16): kgen's Hopper
    wgmma GEMM's; None where the variant has no such GEMM (the matrix-vector rewrite's 16-bit
    build has no GEMM at all: sixteen_bit_builds)."""
    from kgen.tune.configs import HALF_WGMMA_BN, HALF_WGMMA_STAGES

    if spec.family != "wgmma" or not sixteen_bit_builds(spec):
        return None
    t = spec.tile
    return f"kgen::WgmmaWsHalfGemm<{OPERAND_CTYPE}, {t.bm}, {HALF_WGMMA_BN}, {HALF_WGMMA_STAGES}, {t.group_m}>"


def autocast_gemm_type(spec: Spec) -> str | None:
    """The GEMM of the build for torch.autocast where the module is fp32 (-DKGEN_FP32_WEIGHT): the
    round16 GEMM (kernels/gemm_wgmma_round16.cuh) on x converted as autocast converts it and the
    fp32 weight rounded in its registers, as eager's Linear rounds it there, so that no pass over
    w converts it on each call (0.08 ms of KernelBench 12's 0.349 ms under autocast; docs/perf.md,
    session 43). Where every part's forward GEMM can run it (K a multiple of ROUND16_K_MULTIPLE;
    no part that a rewrite left without a GEMM) on the weight as the module stores it (not stored
    (in, out) for x @ W: ModelNew would copy it transposed on each call, in fp32, which costs
    more than the conversion it saves); None elsewhere: there x and w are both converted and the
    half GEMM runs, as for a 16-bit module."""
    from kgen.tune.configs import AUTOCAST_ROUND16_TILE

    if half_gemm_type(spec) is None:
        return None
    for low in lowered_parts(spec):
        k = low.graph.in_features
        if low.graph.is_prologue:
            return None   # (a prologue's file refuses torch.autocast: forward_lines)
        if (low.gemv or low.constant is not None or k <= 0 or k % ROUND16_K_MULTIPLE
                or low.graph.gemm.attrs.get("stored_kn")):
            return None
    t = AUTOCAST_ROUND16_TILE
    return f"kgen::WgmmaWsRound16Gemm<{OPERAND_CTYPE}, {t.bm}, {t.bn}, {t.stages}, {t.group_m}, {OPERAND_CTYPE}>"


def sixteen_bit_gemm_type(spec: Spec) -> str | None:
    """The GEMM of the spec's 16-bit builds (kernel.cu.j2's kgen_cfg::Gemm where x is 16-bit): the
    half GEMM, or where the file has the build for an fp32 module inside torch.autocast, that
    build's GEMM when the weight is fp32 (kgen_weight_t, -DKGEN_FP32_WEIGHT: autocast_gemm_type)."""
    half, autocast = half_gemm_type(spec), autocast_gemm_type(spec)
    if autocast is None:
        return half
    return f"std::conditional_t<std::is_same<{WEIGHT_CTYPE}, float>::value, {autocast}, {half}>"


def lowered(spec: Spec) -> Lowered:
    """The spec's module (its last GEMM part), lowered for its variant (fusion 2 fuses
    BatchNorm's partials into the GEMM epilogue, a cuBLAS GEMM never does; fusion 0 runs a
    point-wise chain after the Linear's output in a kernel of its own)."""
    return lowered_parts(spec)[-1]


def lowered_parts(spec: Spec) -> list[Lowered]:
    """Each GEMM part of the spec's module, first to last, lowered for its variant (the same
    GEMM variant for every part)."""
    return [_lowered(part, spec.fusion == 2, spec.family == "cublas", spec.family == "gemv", spec.eager_gemm,
                     spec.fusion == 0)
            for part in spec.graph().parts]


@functools.lru_cache(maxsize=256)
def _lowered(graph, fused: bool, external: bool, gemv: bool, eager_gemm: bool, defer_chain: bool) -> Lowered:
    return lower(graph, fused, external, gemv, eager_gemm, defer_chain)


def _part_context(spec: Spec, low: Lowered, library: list[str]) -> dict:
    args = forward_args(low)
    has_backward = backward.has_kernels(low)
    back = backward_args(low)
    files = selected_files(PART_LIBRARY, kernel_needs(spec, [low]), tuple(library))
    return {
        # The forward's GEMM runs at the part's K only (its in_features); a prologue has none.
        "gemm_type": "kgen::ExternalGemm" if low.graph.is_prologue else gemm_type(spec, low.graph.in_features),
        "prologue": low.graph.is_prologue,
        "sources": [kernel_source(name) for name in files],
        # (kgen_cfg::kPadsK, and kgen_forward_<part>'s call of pad_k first)
        "pads_k": "pad_k.cuh" in files,
        # kgen_forward_<part> calls: a part with backward kernels may keep z (entry_backward.cuh).
        "forward_entry": "forward_entry_with_backward" if has_backward else "forward_entry",
        "backward_struct": backward.backward_struct(low) if has_backward else None,
        # (A stub where the part has no tail or no backward: entry.cuh names it.)
        "tail_backward": backward.tail_backward_struct(low if has_backward else None),
        "backward_kind": backward.KIND_NAMES[backward.kind(low) if has_backward else 0],
        "kept_per_column": backward.kept_per_column(low),
        "backward_params": ", ".join(f"{ctype} {name}" for name, ctype in back),
        # kgen_backward_packed_<part>: the entry with its arguments in one array, for the C++
        # autograd node (native_backward.cpp), which calls it through its address
        "native": uses_native_backward(spec, low),
        "backward_packed_args": ", ".join(f"({ctype}) a[{k}]" for k, (_, ctype) in enumerate(back)),
        # (p.N: the row stride of a per-element operand, Dropout's mask.)
        "backward_operands": ([f"p.operand[{k}] = operand{k};" for k in range(len(low.operands))] + ["p.N = N;"]
                              + input_gradient_slot_lines(low)),
        # grad_cols's rows: the operands' column sums, then BatchNorm's two (the entry zeroes them)
        "column_grad_rows": len(low.operands) + 2,
        "lowered": low,
        # The constant a rewritten part outputs (kgen_cfg::kConstantValue; unused without one).
        "constant_literal": cuda_float(0.0 if low.constant is None else low.constant),
        "ir_lines": low.describe(),
        "fill_lines": fill_lines(low),
        "forward_args": args,
        "forward_params": ", ".join(f"{ctype} {name}" for name, ctype in args),
        "forward_arg_names": ", ".join(name for name, _ in args),
    }


def _source_context(spec: Spec) -> dict:
    needs = kernel_needs(spec)
    library = selected_files(KERNEL_LIBRARY, needs)
    return {
        "version": __version__,
        "config_name": spec.config_name(),
        "arch": spec.arch,
        "max_smem_bytes": ARCH_LIMITS[spec.arch]["smem"],
        "family": spec.family,
        "fusion": spec.fusion,
        "tile": spec.tile,
        "fused_stats": spec.fusion == 2 and spec.family != "cublas",
        "parts": [_part_context(spec, low, library) for low in lowered_parts(spec)],
        "gemm_type": gemm_type(spec),
        "half_gemm_type": half_gemm_type(spec),
        "sixteen_bit_gemm_type": sixteen_bit_gemm_type(spec),
        "sixteen_bit": sixteen_bit_builds(spec),
        "operand_ctype": OPERAND_CTYPE,
        "cublas_compute": CUBLAS_COMPUTE_TYPES.get(spec.math, ""),
        # (an fp16x3 variant's tf32x3 GEMMs too: its backward's, a part whose K fp16x3 cannot
        # read; fp16x3's own split keeps infinities always)
        "split_keeps_infinities": spec.math in ("tf32x3", "fp16x3") and any(
            split_keeps_infinities(low.graph) for low in lowered_parts(spec)),
        "library": [kernel_source(name) for name in library],
        # (w's split: the sizes of its buffers exported, and the file's Python that keeps them)
        "splits_w": needs.fp16x3,
    }


@functools.lru_cache(maxsize=512)
def render_cuda_source(spec: Spec) -> str:
    """The extension's one translation unit. It depends on the variant and its target, not on
    the shape (only on whether each part's K is a multiple of 4: gemm_type), so files for
    different shapes of one variant share a build."""
    return _ENV.get_template("kernel.cu.j2").render(**_source_context(spec))


def extra_ldflags(spec: Spec) -> list[str]:
    return ["-lcublas"] if spec.family == "cublas" else []


def code_key(spec: Spec) -> str:
    """Hash of everything that decides the build: the source and the link flags."""
    h = hashlib.sha256(render_cuda_source(spec).encode())
    h.update(repr(extra_ldflags(spec)).encode())
    return h.hexdigest()[:16]


def generate_command(spec: Spec) -> str:
    """The `kgen generate` command line that reproduces this spec."""
    from kgen.tune.configs import DEFAULT_ARCH
    from kgen.frontend.problems import is_path

    source = spec.problem if is_path(spec.problem) else f"--problem {spec.problem}"
    parts = ["kgen generate", source, f"--batch {spec.batch}",
             f"--in {spec.in_features}", f"--out {spec.out_features}", f"--math {spec.math}",
             f"--backend {spec.backend}", f"--fusion {spec.fusion}"]
    t = spec.tile
    if t is not None:
        parts += [f"--tile {t.bm}x{t.bn}x{t.bk}", f"--warp {t.wm}x{t.wn}"]
        parts.append(f"--thread {t.tm}x{t.tn}" if t.tm else f"--stages {t.stages}")
        parts.append(f"--group {t.group_m}")
    parts += [f"--set {name}={value}" for name, value in spec.constants]
    if spec.arch != DEFAULT_ARCH:
        parts.append(f"--arch {spec.arch}")
    return " ".join(parts)


def describe_variant(spec: Spec) -> list[str]:
    if lowered(spec).constant is not None:
        return ["variant:   no GEMM: the output is a constant, see `rewrite:` (the variant options "
                "do not change the code)"]
    if spec.family == "gemv":
        lines = ["variant:   no GEMM: the matrix-vector rewrite (fp32 FFMA), see `rewrite:`"]
        if sixteen_bit_builds(spec):
            lines.append("16-bit:    a bf16 / fp16 module runs a build of its own: x and w read in its dtype, "
                         "every sum in fp32; the row's value and every op after it rounded to the module's dtype "
                         "as torch's ops round. z itself, which eager rounds to the dtype element by element, is "
                         "never formed: nearer the exact row sums than eager, which KernelBench's comparison with "
                         "eager at 1e-2 fails where eager's own rounding moves them further (a search in the "
                         "dtype validates it)")
        return lines
    if spec.family == "cublas":
        gemm = f"cuBLAS GEMM ({CUBLAS_COMPUTE_TYPES[spec.math]})"
        if any(low.eager_sums for low in lowered_parts(spec)):
            # (the GEMM is the call eager makes: with its row sums, eager's own rounding)
            gemm += ", row sums in the order of torch's own CUDA reduction (kernels/eager_sum.cuh)"
    elif spec.family == "simt":
        gemm = "kgen SIMT GEMM (fp32 FFMA)"
    elif spec.family == "wgmma":
        gemm = (f"kgen Hopper tensor-core GEMM (wgmma, {spec.math}; warp-specialized: a TMA "
                f"producer warpgroup feeds {spec.tile.bm // 64} consumer warpgroup(s))")
        if spec.math == "fp16x3":
            gemm += ("; fp16x3: x and w scaled per row by a power of two and split into fp16 hi + lo "
                     "by a kernel of their own, three fp16 products per k, partial sums added in fp32; "
                     "w's split kept from call to call beside w (as many bytes as w, for as long as w lives), "
                     "each row of w hashed on every call and split again where it changed (not read at all while "
                     "w's version counter is unchanged where ModelNew.kgen_trust_weight_versions() says to trust it)")
            if spec.tile.bm == spec.tile.bn:
                gemm += (f" (at batches up to {FP16X3_W_IN_REGISTERS_MAX_ROWS} rows w is split in the GEMM's "
                         "registers instead, per row and k-tile of 64, unless the version counter is trusted)")
            if any(low.graph.out_features <= spec.tile.bn for low in lowered_parts(spec)):
                gemm += (f" (a GEMM no wider than {spec.tile.bn} splits x in its registers instead, per row and "
                         f"k-tile of 64, where its tiles fill a quarter of the GPU's SMs)")
            if not all(runs_fp16x3(spec, low.graph.in_features) for low in lowered_parts(spec)):
                gemm += " (a GEMM whose K is not a multiple of 8 runs tf32x3)"
        if spec.math in ROUND16_MATHS:
            gemm += (f"; {spec.math} products of the fp32 operands, as eager's Linear under {spec.math} "
                     f"torch.autocast: x rounded to {spec.math} by a kernel of its own, w in the GEMM's registers "
                     "(two 128 x 128 tiles a CTA, one at batches of at most 128 rows); the backward's GEMMs run tf32")
            if not all(runs_round16(spec, low.graph.in_features) for low in lowered_parts(spec)):
                gemm += " (as does a GEMM whose K is not a multiple of 8)"
            if runs_fp16_products(spec):
                gemm += ("; fp16 keeps TF32's 11 significant bits, within its range: an operand beyond "
                         "65504 becomes infinite, as under fp16 autocast")
    else:
        gemm = f"kgen tensor-core GEMM (mma.sync, {spec.math})"
    # The fusion level places BatchNorm's column statistics (1, 2) or a point-wise chain (0); a
    # module without the one or the other has the same code at either level (its stages are
    # listed below).
    parts = lowered_parts(spec)
    if spec.fusion == 0:
        fusion = (f"fusion 0: {FUSION_LEVELS[0]}" if any(low.deferred_chain for low in parts) else
                  "fusion 0: no point-wise chain after the Linear to take out of the GEMM's epilogue "
                  "(the code of fusion 1)")
    elif any(low.batchnorm for low in parts):
        fusion = f"fusion {spec.fusion}: {FUSION_LEVELS[spec.fusion]}"
    else:
        fusion = f"fusion {spec.fusion}: no BatchNorm, so no column statistics to place (both levels are this code)"
    lines = [f"variant:   {gemm}; {fusion}"]
    t = spec.tile
    if t is not None:
        detail = f"thread {t.tm}x{t.tn}" if t.tm else f"{t.stages} stages"
        lines.append(f"tile:      CTA {t.bm}x{t.bn}x{t.bk}, warp {t.wm}x{t.wn}, {detail}, "
                     f"raster group {t.group_m}, {cta_threads(spec.family, t)} threads")
    if half_gemm_type(spec) is not None:
        from kgen.tune.configs import HALF_WGMMA_BN, HALF_WGMMA_STAGES

        # (what the lines above say is the fp32 build's: a 16-bit module runs none of its split)
        lines.append(f"16-bit:    a bf16 / fp16 module runs a build of its own: kgen's wgmma GEMM on its 16-bit "
                     f"operands as they are, fp32 accumulation, CTA {t.bm}x{HALF_WGMMA_BN}x64 in "
                     f"{HALF_WGMMA_STAGES} stages (128 wide where {HALF_WGMMA_BN}-wide tiles would fill at most "
                     "half the GPU, split in K where still too few; at a few rows a stream over w on FMAs); every op after "
                     "it in fp32, rounded to the "
                     "module's dtype as torch's ops round")
        if spec.graph().parts[0].is_prologue:
            lines.append("autocast:  refused: eager runs the ops on the input before the first GEMM in fp32 inside "
                         "torch.autocast, which this file does not (it raises, naming them)")
        elif autocast_gemm_type(spec) is not None:
            from kgen.tune.configs import AUTOCAST_FP32_WEIGHT_MAX_ROWS as hi
            from kgen.tune.configs import AUTOCAST_FP32_WEIGHT_MIN_ROWS as lo
            from kgen.tune.configs import AUTOCAST_ROUND16_TILE as a

            lines.append(f"autocast:  inside torch.autocast an fp32 module's weight stays fp32 where no gradient "
                         f"of it is wanted (inference, frozen weights) at batches of {lo}-{hi} rows: kgen's wgmma "
                         f"GEMM rounds it to autocast's dtype in its registers, x converted as autocast converts "
                         f"it, CTA {2 * a.bm}x{a.bn}x64 in {a.stages} stages ({a.bm} rows at batches up to {a.bm}); "
                         "elsewhere the weight is converted once a call, as x is")
    return lines


def describe_measured(measured: dict | None, key: str | None = None) -> list[str]:
    """The header's measurement: what the search that chose this file measured (`key`: this
    file's code, said to differ where the search measured another build of the variant)."""
    if not measured:
        return ["measured:  nothing yet (not from a search); run `kgen validate` and `kgen bench`"]
    m = measured
    from kgen.tune.configs import precision_name

    # (bench.measured names the module's dtype, torch's name, where it is not fp32: eager ran in it too)
    dtype = precision_name(m.get("dtype", "float32"))
    lines = [f"measured:  {m.get('device', 'an unnamed device')}, {m.get('date', 'undated')}"
             + "".join(f", {label} {m[k]:{fmt}}" for k, label, fmt in (("batch", "batch", ""), ("tol", "tol", "g"))
                       if k in m) + ("" if dtype == "fp32" else f", the module in {dtype}")]
    if "median_ms" in m:
        spread = f" (p20 {m['p20_ms']:.3f}, p80 {m['p80_ms']:.3f})" if "p20_ms" in m and "p80_ms" in m else ""
        eager = (f"; eager {dtype} reference {m['eager_ms']:.3f} ms in the same run" if "eager_ms" in m else "")
        ratio = f" -> {m['ratio']:.3f}x its time" if "ratio" in m else ""
        lines.append(f"           {m['median_ms']:.3f} ms median{spread}{eager}{ratio}")
    if "max_abs_err" in m:
        rel = f", max rel {m['max_rel_err']:.2e}" if "max_rel_err" in m else ""
        lines.append(f"           max abs error vs fp64 {m['max_abs_err']:.2e}{rel}")
    if "eager_max_abs_err" in m:
        lines.append(f"           ill-conditioned: eager fp32 itself fails allclose with fp64 at tol {m['tol']:g} "
                     f"(max abs {m['eager_max_abs_err']:.2e}); KernelBench's eval, which compares with eager, can "
                     "fail a result nearer the exact one")
    if "gate" in m:
        worst = f"; worst error {m['error_ratio']:.2f}x eager {dtype}'s" if "error_ratio" in m else ""
        lines.append(f"passed:    {m['gate']}{worst}")
    for b, at in (m.get("at_batches") or {}).items():
        lines.append(f"           at batch {b}: {at['median_ms']:.3f} ms; eager {dtype} {at['eager_ms']:.3f} ms "
                     f"-> {at['ratio']:.3f}x (the search's other batches: fully validated at each)")
    if "runoff_ms" in m:
        lines.append(f"runoff:    {m['runoff_ms']:.3f} ms, the median of its runoff rounds against the candidates "
                     f"closest to it (each timed right after eager {dtype})")
    if "search_record" in m:
        # A file `kgen generate` re-made from an earlier search's winner: the numbers are that
        # search's, and the code they were measured on may be an older build of the variant.
        same = m.get("key") in (None, key)
        lines.append(f"source:    the winner of the search recorded in {m['search_record']}"
                     + ("" if same else f", measured on that day's code of the variant (key {m['key']}; this "
                        f"file's is {key}): `kgen bench` measures this one"))
    return lines


def reference_label(spec: Spec) -> str:
    ref = spec.reference()
    return f"{ref.id}, sha256 {ref.sha256[:16]}"


def describe_parts(parts: list[Lowered]) -> list[str]:
    """The stages of each GEMM part (the summary of the one part of most modules)."""
    if len(parts) == 1:
        return parts[0].summary()
    gemms = [p for p in parts if not p.graph.is_prologue]
    widths = " -> ".join(str(w) for w in [gemms[0].graph.in_features] + [p.graph.out_features for p in gemms])
    before = "a prologue (ops on the input before the first GEMM) and " if parts[0].graph.is_prologue else ""
    lines = [f"chain:     {before}{len(gemms)} GEMM{'s' if len(gemms) > 1 else ''} ({widths} features), run in turn: "
             "each part's output, in memory, is the next GEMM's input"]
    for k, low in enumerate(parts):
        lines.append(f"part {k}:    the ops on the input before the first GEMM, {low.graph.in_features} features"
                     if low.graph.is_prologue else
                     f"part {k}:    GEMM {low.graph.in_features} -> {low.graph.out_features} and its epilogue")
        lines += ["  " + line for line in low.summary()]
    return lines


def backward_gemm_words(spec: Spec) -> str:
    """What runs an fp32 module's backward GEMMs (gemm_type at any K): the forward's GEMM, or for
    an fp16x3 or wgmma bf16 / fp16 variant the same tile's tf32x3 or tf32 one."""
    if spec.family == "wgmma" and (spec.math == "fp16x3" or spec.math in ROUND16_MATHS):
        return f"the same tile's {'tf32x3' if spec.math == 'fp16x3' else 'tf32'} GEMM"
    return "the same GEMM"


def describe_backward(parts: list[Lowered], half: bool = False, gemm: str = "the same GEMM") -> str:
    """One line: whether training works (every part has backward kernels) and, if not, why.
    `half`: the file runs bf16 / fp16 modules too (their dx and dW GEMMs run on torch's GEMM in
    the module's dtype: model_new.py.j2, _kgen_launch_backward). `gemm`: what runs dx and dW for an
    fp32 module (backward_gemm_words)."""
    reasons = [backward.unsupported(low) for low in parts]
    missing = [f"part {k}: {r}" if len(parts) > 1 else r for k, r in enumerate(reasons) if r]
    if not missing and all(backward.zero_gradients(low) for low in parts):
        return ("backward:  zeros: the output is a constant (see `rewrite:`), so every gradient is 0, as "
                "torch's (whose are NaN where x, W or a parameter holds a NaN or an infinity; these are not); "
                "no kernels, nothing kept")
    if not missing and any(low.gemv for low in parts):
        tail = any(low.tail for low in parts)
        return ("backward:  kgen kernels (" + ("the broadcast tail's gradient summed to its core value, then " if tail else "")
                + "each row sum's gradient; dz = that times the chain's scale per feature has rank one, so dx and "
                "dW are outer products of vectors, no GEMM: kernels/gemv_backward.cuh); gradients of the input and "
                "of every parameter; in training the forward keeps each row's sum and W's column sums (M + K "
                "floats)" + (" and the broadcast tail's core value" if tail else ""))
    if not missing:
        kept = ("z (M x N floats per GEMM part) and BatchNorm's 5 values per feature"
                if any(low.batchnorm for low in parts) else "z (M x N floats per GEMM part)")
        tail = any(low.tail for low in parts)
        if tail:
            kept += " and the broadcast tail's core value"
        staged = any(backward.kind(low) == backward.KIND_STAGED for low in parts)
        how = ("the epilogue's stages reversed, then" if staged else "dz from z, then")
        if tail:
            how = "the broadcast tail's gradient summed to its core value, " + how
        same = f"on {gemm}"
        gemms = (f"{same}; a bf16 / fp16 module's on torch's GEMM in its dtype, from dz rounded "
                 "to it, its eager training through a C++ autograd node built on first use" if half
                 else same)
        reached = {n.kind for n in backward.gradient_leaves(parts[-1])}
        scope = ("gradients of the input and of every parameter" if "gemm" in reached
                 else "no gradient: the reference's output has none (a detach or no_grad before it)"
                 if not reached
                 else "gradients of the parameters after the GEMM's detached output only, as the reference's")
        prologue = ("; the prologue's stages reversed give x's gradient (no GEMM)" if parts[0].graph.is_prologue else "")
        return (f"backward:  kgen kernels ({how} dx = dz W and dW = dz^T x {gemms}{prologue}); "
                f"{scope}; in training the forward keeps {kept}")
    return f"backward:  raises at backward() ({'; '.join(missing)})"


def render_header(spec: Spec, measured: dict | None) -> str:
    ref = spec.reference()
    parts = lowered_parts(spec)
    lines = [
        f"ModelNew for {spec.problem_name}: {ref.docstring() or 'a GEMM followed by an epilogue chain'}",
        "",
        f"Generated by kgen {__version__} (source {kgen_source_digest()}). Do not edit; "
        "regenerate with:",
        f"    {generate_command(spec)}",
        "",
        f"reference: {reference_label(spec)}",
        f"shapes:    batch {spec.batch} (any batch works), in_features {spec.in_features}, "
        f"out_features {spec.out_features}",
        *describe_variant(spec),
        *describe_parts(parts),
        describe_backward(parts, half_gemm_type(spec) is not None, backward_gemm_words(spec)),
        f"target:    {spec.arch} (the extension is built for the GPU it runs on)",
        f"key:       {spec.key()} (hash of the CUDA source; names the build)",
        *describe_measured(measured, spec.key()),
    ]
    return "\n".join(lines)


def shared_classes(source: str) -> list:
    """The classes the reference defines at its top level besides Model, in order: ModelNew takes
    their instances made by another execution of the reference's text as its copy's
    (model_new.py.j2, _kgen_own_instance)."""
    return [node.name for node in parsed(source).body
            if isinstance(node, ast.ClassDef) and node.name != "Model"]


def render(spec: Spec, measured: dict | None = None) -> str:
    from kgen.tune.configs import AUTOCAST_FP32_WEIGHT_MAX_ROWS, AUTOCAST_FP32_WEIGHT_MIN_ROWS

    ref = spec.reference()
    parts = lowered_parts(spec)
    rows = rows_input(spec)
    token = token_input(spec)
    cuda_source = render_cuda_source(spec)
    if "'''" in cuda_source:  # it sits in a raw triple-quoted string
        raise ValueError("kernel source contains ''' and cannot be embedded")
    source_literal, note = reference_source_literal(ref.source)
    native_plans = [native_plan(low) if uses_native_backward(spec, low) else None for low in parts]
    # (whether a GEMM of the file splits w into fp16 halves: only then the Python that keeps splits)
    splits_w = kernel_needs(spec, parts).fp16x3
    module_name = re.sub(r"\W", "_", ref.name)   # (the reference's copy's, in the emitted file)
    # (the body's forward: ModelNew.forward itself, or _kgen_forward under a forward of the reference's names)
    body_forward = "_kgen_forward" if public_forward(parts) else "forward"
    text = _ENV.get_template("model_new.py.j2").render(
        header=checker_safe_header(render_header(spec, measured)),
        spec=spec,
        # (a repr's strings are non-raw: checker_safe's escapes read back as the path itself)
        spec_literal=checker_safe(pprint.pformat(spec.to_dict(), sort_dicts=True, width=100)),
        measured_literal=checker_safe(pprint.pformat(measured, sort_dicts=True, width=100)),
        reference_literal=repr(ref.sha256),
        reference_label=reference_label(spec),
        reference_source_literal=source_literal,
        reference_encoding_note=note,
        reference_constants=pprint.pformat(ref.set_constants, sort_dicts=False, width=100),
        pins_constants=bool(ref.set_constants),   # else the file's text runs as it is
        shared_classes=shared_classes(ref.source),
        reference_module_name=module_name,
        # (the label of the reference's copy: a reference file named pass.py is <reference p\x61ss>)
        reference_label_name=checker_safe(f"<reference {module_name}>"),
        hopper_only=spec.family == "wgmma",
        smem_bytes=spec_smem_bytes(spec),
        extra_ldflags=repr(extra_ldflags(spec)),
        parts_args=[[(name, ctypes_type(ctype)) for name, ctype in forward_args(low)] for low in parts],
        cuda_source=cuda_source,
        title=checker_safe(sentence(ref.docstring() or f"ModelNew for {spec.problem_name}")),
        has_batchnorm=any(low.batchnorm for low in parts),
        out_shapes=[out_shape(low) for low in parts],
        forward_lines=(device_context_lines(parts, "self._kgen_forward_rows" if rows or token else f"self.{body_forward}")
                       + forward_lines(parts, sixteen_bit_builds(spec))),
        called_modules=called_modules_literal(parts[-1].traced.called_modules),
        weight_methods=weight_methods(parts),
        keeps_w_split=repr(tuple(not computes_weight(low.graph.gemm) and not low.graph.is_prologue for low in parts)),
        keeps_w_splits=any(runs_fp16x3(spec, low.graph.in_features) and not computes_weight(low.graph.gemm)
                           and not low.graph.is_prologue for low in parts),
        prologue_parts=repr(tuple(k for k, low in enumerate(parts) if low.graph.is_prologue)),
        forward_params=forward_params(parts),
        extra_inputs=bool(extra_input_params(parts)),
        # (a (..., features) input's: each taken as its rows, as x is, by the forward's wrapper)
        extra_input_names=(list(input_labels(parts).items()) if rows and spec.reference().feature_dims == 1
                           else []),
        input_label=input_params(parts)[0],   # (x as the reference's forward names it, in messages)
        public_forward=public_forward(parts),
        body_forward=body_forward,
        forward_call_args=forward_call_args(parts),
        rows_input=rows,
        # (a (batch, tokens, features) input of which the first GEMM reads one token: the forward
        # takes x.select(1, token_position), the position as the reference writes it)
        token_input=token,
        token_position=parts[-1].traced.token,
        rows_return=rows_return_lines(rows_at(parts[-1].traced) if ref.rows_of is not None else 0),
        # (a (batch, features) reference's file that also takes one sample, (features,))
        takes_vector=bool(rows) and ref.rows_of is None and takes_rows(ref, 1),
        feature_dims=spec.reference().feature_dims,
        op_parts=[op_part(low) for low in parts],
        backward_args=[None if not backward.has_kernels(low) else
                       [(name, ctypes_type(ctype)) for name, ctype in backward_args(low)] for low in parts],
        kgen_digest=kgen_source_digest(),
        updated_in_place=repr(UPDATED_IN_PLACE),
        splits_w=splits_w,
        side_by_side=any(low.graph.gemm.attrs.get("side_by_side") for low in parts),
        side_by_side_function=SIDE_BY_SIDE,
        launch_values=[LAUNCH_VALUES[name] if splits_w or name not in NO_W_SPLIT_VALUES else NO_W_SPLIT_VALUES[name]
                       for name, _ in BASE_ARGS],
        operand_builds=operand_builds_literal(spec),
        fp32_only=not sixteen_bit_builds(spec),
        autocast_fp32_output=sixteen_bit_builds(spec) and bool(parts[-1].traced.autocast_output),
        fp32_value_output=sixteen_bit_builds(spec) and parts[-1].fp32_output,
        fp32_weight=autocast_gemm_type(spec) is not None,
        fp32_weight_rows=(AUTOCAST_FP32_WEIGHT_MIN_ROWS, AUTOCAST_FP32_WEIGHT_MAX_ROWS),
        # the matrix-vector rewrite: its backward keeps other values and runs no GEMM
        gemv=spec.family == "gemv",
        zero_gradients=any(backward.zero_gradients(low) for low in parts),
        fp32_only_reason=repr(fp32_only_reason(spec)),
        native_plans=native_plans,
        has_native=any(native_plans),
        native_source=NATIVE_SOURCE.read_text() if any(native_plans) else "",
    )
    _check_names_apart(ref, text)
    return text


# Module-level names the emitted file may share with its reference: the ones it defines on
# purpose, with the reference's own values (KernelBench's eval reads them after both files ran).
SHARED_ON_PURPOSE = ("get_inputs", "get_init_inputs")


def module_names(source: str) -> dict[str, str | None]:
    """The names a Python file binds at module level: name -> the dotted target of an import
    (`import torch.nn as nn`: "torch.nn"), None for anything else it binds."""
    names: dict[str, str | None] = {}
    for node in parsed(source).body:
        if isinstance(node, ast.Import):
            for a in node.names:
                names[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            for a in node.names:
                names[a.asname or a.name] = f"{'.' * node.level}{node.module or ''}.{a.name}"
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = None
        else:
            for target in ast.walk(node) if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign,
                                                              ast.For, ast.With)) else ():
                if isinstance(target, ast.Name) and isinstance(target.ctx, ast.Store):
                    names[target.id] = None
    return names


# What the emitted file binds at module level: its own names (OWN_NAME), get_inputs and
# get_init_inputs (SHARED_ON_PURPOSE), and its imports (model_new.py.j2's; _check_names_apart
# checks every rendered file against these, so the two cannot drift apart).
OWN_NAME = re.compile(r"_kgen|_KGEN|KGEN_|ModelNew$")
EMITTED_IMPORTS = {"__future__": "__future__", "ast": "ast", "base64": "base64", "contextlib": "contextlib",
                   "copyreg": "copyreg", "ctypes": "ctypes", "hashlib": "hashlib", "inspect": "inspect", "os": "os",
                   "sys": "sys", "time": "time", "types": "types",
                   "typing": "typing", "warnings": "warnings", "weakref": "weakref", "torch": "torch", "nn": "torch.nn",
                   "load_inline": "torch.utils.cpp_extension.load_inline"}


def names_the_file_would_rebind(reference_source: str) -> list[str]:
    """The reference's module-level names the emitted file binds too, to other values. KernelBench's
    eval runs the reference and then the emitted file in one namespace, where the reference's
    Model would then read kgen's (a helper `_build` once did): kgen's own names are _kgen_ /
    _KGEN_ / KGEN_, and an import of the same module is the same value."""
    theirs = module_names(reference_source)
    return sorted(name for name, target in theirs.items()
                  if OWN_NAME.match(name) or (name in EMITTED_IMPORTS and target != EMITTED_IMPORTS[name]))


def refuse_shared_names(ref) -> None:
    """ReferenceError naming what names_the_file_would_rebind finds in `ref`'s source."""
    from kgen.frontend.reference import ReferenceError

    clash = names_the_file_would_rebind(ref.source)
    if clash:
        raise ReferenceError(f"{ref.path} defines {', '.join(clash)} at module level, as kgen's emitted file "
                             "does; KernelBench's eval runs both in one namespace, where the file would "
                             "rebind them: rename them in the reference")


def _check_names_apart(ref, text: str) -> None:
    """The rendered file binds no module-level name but those OWN_NAME, SHARED_ON_PURPOSE and
    EMITTED_IMPORTS allow (a kgen bug otherwise), and none the reference binds to another value."""
    stray = sorted(name for name, target in module_names(text).items()
                   if not (OWN_NAME.match(name) or name in SHARED_ON_PURPOSE
                           or EMITTED_IMPORTS.get(name, "-") == target))
    if stray:
        raise RuntimeError(f"kgen's emitted file binds {', '.join(stray)} at module level; its names must "
                           "start _kgen / _KGEN / KGEN_ (generator.OWN_NAME) or be EMITTED_IMPORTS")
    refuse_shared_names(ref)


def operand_builds_literal(spec: Spec) -> str:
    """The emitted file's _KGEN_OPERAND_BUILDS: the dtypes it runs, each with its build's operand type."""
    dtypes = OPERAND_BUILDS if sixteen_bit_builds(spec) else {"float32": None}
    return "{" + ", ".join(f"torch.{name}: {operand!r}" for name, operand in dtypes.items()) + "}"


def checker_safe(text: str) -> str:
    """`text`, bound for a non-raw Python string of the emitted file (a docstring, a repr), with
    each match of KernelBench's strict rules broken by writing its second character as a \\xNN
    escape: Python reads back the same string, while the checker, which searches the text of
    strings too, finds no word it bans (a reference in forward-pass/ or named relu-pass.py, whose
    path the header's regenerate line and KGEN_SPEC's problem record). Every strict pattern opens
    with two literal word characters, so the second follows one, never a backslash whose escape it
    would end. (A superset of the checker's view: its cuts at # and // are not made here.)"""
    from kgen.check.static_checks import KERNELBENCH_STRICT

    for _ in range(len(text)):
        hits = [m for _, patterns, _ in KERNELBENCH_STRICT for p in patterns if (m := re.search(p, text))]
        if not hits:
            break
        k = min(m.start() for m in hits) + 1
        text = f"{text[:k]}\\x{ord(text[k]):02x}{text[k + 1:]}"
    return text


def checker_safe_header(header: str) -> str:
    """The header docstring, checker_safe, with a line saying what an escape in it stands for."""
    safe = checker_safe(header)
    if safe == header:
        return header
    return (f"{safe}\n(a backslash escape above is the letter it names, read so by Python; written so for "
            "KernelBench's static checker, which bans some words even in strings)")


def sentence(text: str) -> str:
    """`text` as a sentence of its own (a reference's docstring line often lacks the stop)."""
    return text if text.endswith((".", "!", "?")) else text + "."


def reference_source_literal(source: str) -> tuple[str, str]:
    """The reference's text as a Python literal for the emitted file, and a note on its form:
    verbatim in a raw triple-quoted string where that round-trips and KernelBench's checker,
    which reads string contents too, finds nothing in it; else base64, and the note says why."""
    from kgen.check.static_checks import kernelbench_strict_matches

    for quote in ("'''", '"""'):
        literal = f"r{quote}{source}{quote}"
        try:
            same = ast.literal_eval(literal) == source
        except (SyntaxError, ValueError):
            same = False
        if same:
            break
    else:
        literal = None
    found = kernelbench_strict_matches(source)
    if literal is not None and not found:
        return literal, ""
    encoded = base64.b64encode(source.encode()).decode()
    lines = "\n".join(f"    '{encoded[i:i + 96]}'" for i in range(0, len(encoded), 96))
    why = (f"KernelBench's static checker would reject its text ({found[0]})" if found
           else "it cannot be written as a raw string")
    return f"base64.b64decode(\n{lines}\n).decode()", f"; base64 below, since {why}"


def default_path(spec: Spec) -> Path:
    return DEFAULT_OUTPUT_DIR / f"{spec.name()}.py"


class WriteError(OSError):
    """A file kgen was asked to write and did not: the message says why; nothing was left."""


class WriteRefused(WriteError):
    """A write the user's request itself rules out (an existing file without --force, a
    directory where a file was named): a usage error, where WriteError is the machine's."""


def write_atomic(path: Path, text: str, overwrite: bool = True) -> Path:
    """Write via a temporary file in the same directory and rename: a reader (or a crash) never
    sees half a file, and a failed or interrupted write (no permission, a full disk, Ctrl-C)
    leaves nothing behind.
    Without `overwrite`, an existing file that already holds `text` is left as it is (a rerun
    succeeds) and one that holds anything else is refused, also where it appears while this
    write runs (another kgen writing the same path: the file is linked into place, which fails
    where one exists, instead of renamed over it).
    A symbolic link is written through (the link stays, its target gets the text). What is not a
    regular file (a device such as /dev/null, a pipe) is never replaced, nor written under a path
    one of whose folders is a file. The file gets the usual mode (0666 less the umask), not
    mkstemp's 0600."""
    path = Path(path)
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    if target.is_dir():
        raise WriteRefused(f"{path} is a directory")
    if target.exists() and not target.is_file():
        raise WriteRefused(f"{path} is not a regular file (a device or a pipe); kgen writes files only")
    folder = next((p for p in target.parents if p.exists()), None)
    if folder is not None and not folder.is_dir():
        raise WriteRefused(f"cannot write {path}: {folder} is a file, not a folder")

    def refuse_unless_same() -> Path:
        try:
            unchanged = target.read_text() == text
        except (OSError, UnicodeDecodeError):
            unchanged = False
        if unchanged:   # a rerun: the file already holds exactly this text
            return path
        raise WriteRefused(f"{path} exists and differs from what kgen would write; pass --force to "
                           "replace it")

    if target.exists() and not overwrite:
        return refuse_unless_same()
    tmp = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        if overwrite:
            os.replace(tmp, target)
        else:
            try:
                os.link(tmp, target)   # (fails where a file appeared since the check above)
            except FileExistsError:
                return refuse_unless_same()
            except OSError:   # a filesystem without hard links: the rename, as with overwrite
                os.replace(tmp, target)
    except WriteError:
        raise
    except OSError as e:
        raise WriteError(f"cannot write {path}: {e.strerror or e}") from None
    finally:
        if tmp is not None and os.path.lexists(tmp):
            os.unlink(tmp)
    return path


def write(spec: Spec, path: Path | None = None, measured: dict | None = None,
          overwrite: bool = True) -> Path:
    """Render and write; a file that breaks a static rule (static_checks) is never written."""
    path = path or default_path(spec)
    text = render(spec, measured)
    broken = check_emitted(text)
    if broken:
        raise StaticCheckError(f"{spec.name()} would break the static rules: " + "; ".join(broken))
    return write_atomic(path, text, overwrite=overwrite)
