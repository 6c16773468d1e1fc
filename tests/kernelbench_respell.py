"""Respellings of KernelBench's level-2 GEMM files, made mechanically from the published text (no
per-file variants): the same module as other people write it. Used by
tests/test_kernelbench_respelled.py (and a throwaway driver) to check that kgen traces each to what
the module computes.

`shrink(text, constants)` pins the file's workload constants to small values first (the published
shapes hold gigabytes of weights). `respell(text, axes, seed)` applies a list of axes (AXES), each a
rewrite of the syntax tree that keeps the module's meaning, and returns the new text and how the
state_dict's keys moved (old key -> new key), so that the respelled module can be given the
original's parameters and compared with it value for value.

Some rewrites only hold for some modules (an in-place op where another name still reads the old
value, a method on a Python float); the rewrites guard against those they know of, and the caller
runs the respelled module beside the original with the same parameters (`load_moved`): a
respelling whose module computes something else is the generator's miss, not kgen's.
"""

from __future__ import annotations

import ast
import copy
import inspect
import random
from dataclasses import dataclass, field

import torch
import torch.nn as nn

# ---- helpers ------------------------------------------------------------------------------------


def parse(text: str) -> ast.Module:
    return ast.parse(text)


def expr(src: str) -> ast.expr:
    return ast.parse(src, mode="eval").body


def stmt(src: str) -> ast.stmt:
    return ast.parse(src).body[0]


def dotted(node) -> str | None:
    """`torch.nn.functional.gelu` for that attribute chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def self_attr(node) -> str | None:
    """`m` of `self.m`."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def model_class(tree: ast.Module) -> ast.ClassDef:
    return next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model")


def method(cls: ast.ClassDef, name: str) -> ast.FunctionDef:
    return next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name)


def top_function(tree: ast.Module, name: str) -> ast.FunctionDef:
    return next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)


def module_constants(tree: ast.Module) -> list[str]:
    return [n.targets[0].id for n in tree.body if isinstance(n, ast.Assign) and len(n.targets) == 1
            and isinstance(n.targets[0], ast.Name)]


def rename_names(node, mapping: dict[str, str]):
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and n.id in mapping:
            n.id = mapping[n.id]
        elif isinstance(n, ast.arg) and n.arg in mapping:
            n.arg = mapping[n.arg]
        elif isinstance(n, ast.keyword) and False:
            pass


class NotApplicable(Exception):
    """The axis has nothing to rewrite in this file."""


@dataclass
class Ctx:
    tree: ast.Module
    rng: random.Random
    scalars: set                      # attributes of the model that are Python numbers
    floats: set = field(default_factory=set)   # of them, those that are floats (not a dim)
    shapes: dict = field(default_factory=dict)  # the model's own parameters and buffers: name -> shape
    keys: dict = field(default_factory=dict)   # state_dict key moves: old -> new (or (new, "t"))
    f_alias: str = "F"
    counter: int = 0
    applied: list = field(default_factory=list)

    @property
    def cls(self):
        return model_class(self.tree)

    @property
    def init(self):
        return method(self.cls, "__init__")

    @property
    def forward(self):
        return method(self.cls, "forward")

    def fresh(self, stem: str) -> str:
        self.counter += 1
        return f"{stem}{self.counter}"

    def add_init(self, line: str):
        self.init.body.append(stmt(line))

    def F(self, name: str) -> str:
        return f"{self.f_alias}.{name}"

    def move_key(self, old_prefix: str, new_prefix: str):
        """State keys under old_prefix (a module's attribute) now under new_prefix."""
        self.keys[old_prefix] = new_prefix


def ensure_f_import(tree: ast.Module, alias: str):
    for n in tree.body:
        if isinstance(n, ast.Import) and any(a.name == "torch.nn.functional" and a.asname == alias for a in n.names):
            return
        if isinstance(n, ast.ImportFrom) and n.module == "torch.nn" and any(
                a.name == "functional" and (a.asname or "functional") == alias for a in n.names):
            return
    index = max(i for i, n in enumerate(tree.body) if isinstance(n, (ast.Import, ast.ImportFrom))) + 1
    tree.body.insert(index, stmt(f"import torch.nn.functional as {alias}"))


# ---- op sites: what the forward computes, and its spellings ------------------------------------

# unary ops: name -> (torch function, F function, tensor method, in-place method, nn class)
UNARY = {
    "relu": ("torch.relu", "relu", "relu", "relu_", "ReLU"),
    "sigmoid": ("torch.sigmoid", None, "sigmoid", "sigmoid_", "Sigmoid"),
    "tanh": ("torch.tanh", None, "tanh", "tanh_", "Tanh"),
    "gelu": (None, "gelu", None, None, "GELU"),
    "mish": (None, "mish", None, None, "Mish"),
}
REDUCE = ("sum", "mean", "logsumexp")
EXTREME = ("max", "min")
BINOP = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div"}
OPSYM = {"add": "+", "sub": "-", "mul": "*", "div": "/"}


@dataclass
class Site:
    kind: str            # unary / leaky / hardtanh / clamp / softmax / reduce / extreme / binary / pool / norm
    op: str
    x: ast.expr          # the operand (the tensor)
    params: dict         # name -> ast.expr (or python value)
    module: str | None = None   # the self.<module> it came from


def kwargs_of(call: ast.Call, names: list[str]) -> dict:
    """The call's arguments after its first, by name (positional ones named from `names`)."""
    out = {}
    for name, a in zip(names, call.args[1:]):
        out[name] = a
    for k in call.keywords:
        out[k.arg] = k.value
    return out


def module_classes(ctx: Ctx) -> dict[str, ast.Call]:
    """self.m -> its nn.Cls(...) call, as __init__ makes it."""
    out = {}
    for n in ctx.init.body:
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and self_attr(n.targets[0]) and \
                isinstance(n.value, ast.Call):
            out[self_attr(n.targets[0])] = n.value
    return out


def nn_class(call: ast.Call) -> str | None:
    name = dotted(call.func)
    if name and name.split(".")[0] in ("nn", "torch") and name.split(".")[-1][:1].isupper():
        return name.split(".")[-1]
    return None


def bound_args(cls_name: str, call: ast.Call) -> dict:
    """The nn class's constructor arguments as the call gives them, by name."""
    sig = inspect.signature(getattr(nn, cls_name))
    bound = sig.bind_partial(*call.args, **{k.arg: k.value for k in call.keywords})
    return dict(bound.arguments)


def recognize(node, ctx: Ctx, modules: dict) -> Site | None:
    # x.max(...)[0] / .values
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Call) and \
            isinstance(node.slice, ast.Constant) and node.slice.value == 0:
        inner = recognize_call(node.value, ctx, modules, extreme=True)
        return inner
    if isinstance(node, ast.Attribute) and node.attr == "values" and isinstance(node.value, ast.Call):
        return recognize_call(node.value, ctx, modules, extreme=True)
    if isinstance(node, ast.BinOp) and type(node.op) in BINOP:
        return Site("binary", BINOP[type(node.op)], node.left, {"other": node.right})
    if isinstance(node, ast.Call):
        return recognize_call(node, ctx, modules, extreme=False)
    return None


def recognize_call(call: ast.Call, ctx: Ctx, modules: dict, extreme: bool) -> Site | None:
    name = dotted(call.func)
    short = name.split(".")[-1] if name else None
    is_fn = name is not None and (name.startswith(("torch.", f"{ctx.f_alias}.")) or name.startswith("F."))
    is_method = isinstance(call.func, ast.Attribute) and not is_fn and self_attr(call.func) is None
    if extreme:
        if short in EXTREME and (is_fn or is_method) and (call.args or not is_fn):   # (not input=x)
            x = call.args[0] if is_fn else call.func.value
            kw = kwargs_of(call, ["dim", "keepdim"]) if is_fn else _method_kwargs(call, ["dim", "keepdim"])
            if "dim" in kw:
                return Site("extreme", short, x, kw)
        return None
    attr = self_attr(call.func)
    if attr is not None and attr in modules and len(call.args) == 1:
        cls = nn_class(modules[attr])
        if cls is None:
            return None
        x = call.args[0]
        for op, spell in UNARY.items():
            if cls == spell[4]:
                return Site("unary", op, x, {}, module=attr)
        attrs = {"LeakyReLU": ("leaky", ["negative_slope"]), "Hardtanh": ("hardtanh", ["min_val", "max_val"]),
                 "Softmax": ("softmax", ["dim"]), "MaxPool1d": ("pool", ["kernel_size"]),
                 "AvgPool1d": ("pool", ["kernel_size"]), "GroupNorm": ("norm", []), "BatchNorm1d": ("norm", [])}
        if cls in attrs:
            kind, names = attrs[cls]
            bound = bound_args(cls, modules[attr])
            params = {n: expr(f"self.{attr}.{n}") for n in names if n in bound or kind != "hardtanh"}
            if kind == "hardtanh":
                params = {n: expr(f"self.{attr}.{n}") for n in names}
            op = {"pool": "max" if cls == "MaxPool1d" else "avg", "norm": cls}.get(kind, kind)
            return Site(kind, op, x, params, module=attr)
        return None
    if not name:
        return None
    if is_fn:
        x = call.args[0] if call.args else None
        if x is None:
            return None
        if short in UNARY and len(call.args) == 1 and not call.keywords:
            return Site("unary", short, x, {})
        if short == "leaky_relu":
            return Site("leaky", "leaky", x, kwargs_of(call, ["negative_slope"]))
        if short == "hardtanh":
            return Site("hardtanh", "hardtanh", x, kwargs_of(call, ["min_val", "max_val"]))
        if short in ("clamp", "clip"):
            kw = kwargs_of(call, ["min", "max"])
            if set(kw) == {"min", "max"}:
                return Site("clamp", "clamp", x, kw)
        if short == "softmax":
            return Site("softmax", "softmax", x, kwargs_of(call, ["dim"]))
        if short in REDUCE:
            kw = kwargs_of(call, ["dim", "keepdim"])
            if "dim" in kw:
                return Site("reduce", short, x, kw)
        if short == "min" and len(call.args) == 2 and not call.keywords and self_attr(call.args[1]):
            return Site("minimum", "minimum", x, {"other": call.args[1]})
    elif is_method and short in REDUCE:
        kw = _method_kwargs(call, ["dim", "keepdim"])
        if "dim" in kw:
            return Site("reduce", short, call.func.value, kw)
    return None


def _method_kwargs(call, names):
    out = dict(zip(names, call.args))
    out.update({k.arg: k.value for k in call.keywords})
    return out


def is_tensor(node: ast.expr, ctx: Ctx) -> bool:
    if isinstance(node, ast.Constant) or (isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant)):
        return False
    a = self_attr(node)
    return not (a is not None and a in ctx.scalars)


def src(node) -> str:
    return ast.unparse(node)


def flip_dim(node: ast.expr) -> ast.expr:
    """dim 1 of a 2-D value as -1 (the corpus's reductions all act on (batch, features))."""
    if isinstance(node, ast.Constant) and node.value == 1:
        return ast.Constant(-1)
    return node


def emit(site: Site, style: str, ctx: Ctx) -> ast.expr | None:
    """The site spelled in `style`; None where that style has no spelling of it."""
    x, p = src(site.x), site.params
    P = {k: (src(v) if isinstance(v, ast.AST) else repr(v)) for k, v in p.items()}
    F = ctx.F
    if site.kind == "unary":
        torch_fn, f_fn, meth, _inplace, nn_cls = UNARY[site.op]
        if style == "torch" and torch_fn:
            return expr(f"{torch_fn}({x})")
        if style == "F":
            return expr(f"{F(f_fn or site.op)}({x})")
        if style == "method" and meth:
            return expr(f"({x}).{meth}()")
        if style == "module":
            if site.module:
                return None
            name = ctx.fresh(f"_{site.op}")
            ctx.add_init(f"self.{name} = nn.{nn_cls}()")
            return expr(f"self.{name}({x})")
        if style == "alt":
            if site.op == "relu":
                return expr(f"torch.clamp({x}, min=0.0)")
            if site.op == "mish":
                return expr(f"({x}) * torch.tanh({F('softplus')}({x}))") if isinstance(site.x, ast.Name) else None
            if site.op == "gelu":
                return expr(f"{F('gelu')}({x}, approximate='none')")
            if site.op == "sigmoid":
                return expr(f"torch.special.expit({x})")
        return None
    if site.kind == "leaky":
        slope = P.get("negative_slope", "0.01")
        if style == "torch":
            return expr(f"{F('leaky_relu')}({x}, {slope})")
        if style == "F":
            return expr(f"{F('leaky_relu')}({x}, negative_slope={slope})")
        if style == "module" and not site.module and isinstance(p.get("negative_slope"), ast.Constant):
            name = ctx.fresh("_leaky")
            ctx.add_init(f"self.{name} = nn.LeakyReLU({slope})")
            return expr(f"self.{name}({x})")
        if style == "alt" and isinstance(site.x, ast.Name):
            return expr(f"torch.where({x} > 0, {x}, {x} * {slope})")
        return None
    if site.kind in ("hardtanh", "clamp"):
        lo = P.get("min_val", P.get("min", "-1.0"))
        hi = P.get("max_val", P.get("max", "1.0"))
        if style == "torch":
            return expr(f"torch.clamp({x}, {lo}, {hi})")
        if style == "F":
            return expr(f"{F('hardtanh')}({x}, {lo}, {hi})")
        if style == "method":
            return expr(f"({x}).clamp(min={lo}, max={hi})")
        if style == "alt":
            return expr(f"torch.clip({x}, min={lo}, max={hi})")
        if style == "module" and not site.module and all(
                isinstance(v, (ast.Constant, ast.UnaryOp)) for v in p.values()):
            name = ctx.fresh("_hardtanh")
            ctx.add_init(f"self.{name} = nn.Hardtanh({lo}, {hi})")
            return expr(f"self.{name}({x})")
        return None
    if site.kind == "softmax":
        d = p.get("dim", ast.Constant(1))
        if style == "torch":
            return expr(f"torch.softmax({x}, {src(d)})")
        if style == "F":
            return expr(f"{F('softmax')}({x}, dim={src(flip_dim(d))})")
        if style == "method":
            return expr(f"({x}).softmax({src(flip_dim(d))})")
        if style == "module" and not site.module and isinstance(d, ast.Constant):
            name = ctx.fresh("_softmax")
            ctx.add_init(f"self.{name} = nn.Softmax(dim={src(d)})")
            return expr(f"self.{name}({x})")
        if style == "alt":
            return expr(f"torch.exp({F('log_softmax')}({x}, dim={src(d)}))") if False else None
        return None
    if site.kind in ("reduce", "extreme"):
        d = p["dim"]
        k = P.get("keepdim")
        kw = f", keepdim={k}" if k else ""
        tail = "[0]" if site.kind == "extreme" else ""
        if style == "torch":
            return expr(f"torch.{site.op}({x}, {src(d)}{', ' + k if k else ''}){tail}")
        if style == "method":
            return expr(f"({x}).{site.op}({src(flip_dim(d))}{kw})" + (".values" if tail else ""))
        if style == "F":   # keywords, dim -1
            return expr(f"torch.{site.op}({x}, dim={src(flip_dim(d))}{kw})" + (".values" if tail else ""))
        if style == "alt":
            if site.kind == "extreme":
                return expr(f"torch.a{site.op}({x}, dim={src(d)}{kw})")
            return expr(f"torch.{site.op}({x}, axis={src(d)}{kw})")
        return None
    if site.kind == "minimum":
        other = P["other"]
        if style == "torch":
            return expr(f"torch.minimum({x}, {other})")
        if style == "method":
            return expr(f"({x}).minimum({other})")
        if style == "alt":
            return expr(f"torch.min({other}, {x})")
        return None
    if site.kind == "binary":
        other = p["other"]
        o = src(other)
        sym = OPSYM[site.op]
        if style == "torch":
            if not is_tensor(site.x, ctx):
                return None
            return expr(f"torch.{site.op}({x}, {o})")
        if style == "method":
            if not is_tensor(site.x, ctx):
                return None
            return expr(f"({x}).{site.op}({o})")
        if style == "alt":   # operands swapped where the op commutes
            if site.op in ("add", "mul"):
                return expr(f"({o}) {sym} ({x})")
            if site.op == "sub":
                return expr(f"({x}) + (-({o}))") if is_tensor(other, ctx) is False or True else None
            return None
        return None
    if site.kind == "pool":
        k = P["kernel_size"]
        fn = F(f"{site.op}_pool1d")
        if style == "F":
            return expr(f"{fn}({x}, {k})")
        if style == "torch":
            return expr(f"{fn}({x}, kernel_size={k})")
        return None
    if site.kind == "norm" and site.module:
        m = f"self.{site.module}"
        if style == "F" and site.op == "GroupNorm":
            return expr(f"{F('group_norm')}({x}, {m}.num_groups, {m}.weight, {m}.bias, {m}.eps)")
        if style == "F" and site.op == "BatchNorm1d":
            return expr(f"{F('batch_norm')}({x}, {m}.running_mean, {m}.running_var, {m}.weight, {m}.bias, "
                        f"{m}.training, {m}.momentum, {m}.eps)")
        return None
    return None


STYLES = ("torch", "F", "method", "module", "alt", "spelled", "in forward", "helper")


class OpRewriter(ast.NodeTransformer):
    def __init__(self, ctx: Ctx, choose):
        self.ctx, self.choose = ctx, choose
        self.modules = module_classes(ctx)
        self.changed = 0

    def generic_visit(self, node):
        return super().generic_visit(node)

    def visit(self, node):
        node = super().visit(node)   # inner ones first
        if isinstance(node, ast.expr):
            site = recognize(node, self.ctx, self.modules)
            if site is not None:
                style = self.choose(site)
                if style is not None:
                    new = emit(site, style, self.ctx)
                    if new is not None and ast.dump(new) != ast.dump(node):
                        self.changed += 1
                        return ast.copy_location(new, node)
        return node


def rewrite_ops(ctx: Ctx, choose) -> int:
    fwd = ctx.forward
    rw = OpRewriter(ctx, choose)
    fwd.body = [rw.visit(s) for s in fwd.body]
    return rw.changed


# ---- statement-level: in-place and augmented forms ----------------------------------------------

VIEWISH = ("detach", "view", "reshape", "squeeze", "unsqueeze", "t", "T", "contiguous", "flatten", "expand",
           "expand_as", "view_as", "values")


def _alias_source(value) -> str | None:
    """The name whose tensor `value` shares (b of `b`, `b.detach()`, `b.view(...)`), else None."""
    v = value
    while isinstance(v, (ast.Call, ast.Attribute, ast.Subscript)):
        if isinstance(v, ast.Call):
            v = v.func
        if isinstance(v, ast.Attribute):
            if v.attr not in VIEWISH:
                return None
            v = v.value
        elif isinstance(v, ast.Subscript):
            v = v.value
    return v.id if isinstance(v, ast.Name) and v.id not in ("self", "torch") else None


def _shared_before(fwd: ast.FunctionDef) -> list[set]:
    """For each statement of forward, the names whose tensor another name may share just before
    it (the input, and both sides of `a = b`, `a = b.detach()`, ...), tracked by value: a name
    bound to a new op result is its own again."""
    shared = {a.arg for a in fwd.args.args[1:]}
    out = []
    for s in fwd.body:
        out.append(set(shared))
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
            t = s.targets[0].id
            source = _alias_source(s.value)
            if source is not None:
                shared |= {t, source}
            else:
                shared.discard(t)
    return out


def _loads(node) -> list[str]:
    return [n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]


def inplace(ctx: Ctx, style: str) -> int:
    """`x = op(x, ...)` as `x.op_(...)` / `x op= y` where no other name reads the old x."""
    fwd = ctx.forward
    shared = _shared_before(fwd)
    modules = module_classes(ctx)
    out, changed = [], 0
    for s, aliased in zip(fwd.body, shared):
        new = None
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
            t = s.targets[0].id
            site = recognize(s.value, ctx, modules)
            if site and isinstance(site.x, ast.Name) and site.x.id == t and t not in aliased and \
                    _loads(s.value).count(t) == 1:
                new = _inplace_stmt(site, t, style, ctx)
        if new is None:
            out.append(s)
        else:
            changed += 1
            out.extend(new)
    fwd.body = out
    return changed


def _inplace_stmt(site: Site, t: str, style: str, ctx: Ctx):
    P = {k: (src(v) if isinstance(v, ast.AST) else repr(v)) for k, v in site.params.items()}
    if site.kind == "binary":
        other = self_attr(site.params["other"])
        if other is not None and len(ctx.shapes.get(other, ())) > 2:
            return None   # (x += b of a (1, N, 1, 1) b would broadcast x to 4 dimensions: torch refuses it)
        if isinstance(site.params["other"], ast.Name):
            return None   # (x += r of a local r, KernelBench 51's (batch, in) residual on a (batch, 1) x, would
            #              broadcast x: torch refuses it; a local's shape is not known here)
        if style == "augmented":
            return [stmt(f"{t} {OPSYM[site.op]}= {P['other']}")]
        return [stmt(f"{t}.{site.op}_({P['other']})")]
    if site.kind == "unary" and UNARY[site.op][3]:
        return [stmt(f"{t}.{UNARY[site.op][3]}()")] if style == "augmented" else [stmt(f"{t} = {t}.{UNARY[site.op][3]}()")]
    if site.kind == "unary" and site.op in ("relu", "mish") or site.kind == "leaky":
        fn = {"relu": "relu", "mish": "mish", "leaky": "leaky_relu"}[site.op]
        extra = f", {P['negative_slope']}" if site.kind == "leaky" and "negative_slope" in P else ""
        return [stmt(f"{t} = {ctx.F(fn)}({t}{extra}, inplace=True)")]
    if site.kind in ("clamp", "hardtanh"):
        lo = P.get("min_val", P.get("min", "-1.0"))
        hi = P.get("max_val", P.get("max", "1.0"))
        return [stmt(f"{t}.clamp_({lo}, {hi})")] if style == "augmented" else \
            [stmt(f"{ctx.F('hardtanh')}({t}, {lo}, {hi}, inplace=True)")]
    return None


# ---- forward-level: names, chains ---------------------------------------------------------------

def ssa(ctx: Ctx):
    """Each assignment in forward to a new name (x = f(x); x = g(x) -> h1 = f(x); h2 = g(h1)), the
    input renamed too."""
    fwd = ctx.forward
    current = {}
    arg = fwd.args.args[1]
    current[arg.arg] = "inp"
    arg.arg = "inp"
    n = 0
    for s in fwd.body:
        for node in ast.walk(s):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in current:
                node.id = current[node.id]
        if isinstance(s, ast.Assign):
            for t in s.targets:
                if isinstance(t, ast.Name):
                    n += 1
                    current[t.id] = new = f"{'h' if t.id == 'x' else t.id + '_'}{n}"
                    t.id = new
        elif isinstance(s, (ast.AugAssign, ast.If)):
            raise NotApplicable("augmented assignment or a branch")


def chain(ctx: Ctx) -> int:
    """Single-use intermediate values inlined: `x = f(x); x = g(x)` -> `x = g(f(x))`, and a last
    `x = e; return x` -> `return e`."""
    fwd = ctx.forward
    merged = 0
    body = list(fwd.body)
    i = 0
    while i < len(body) - 1:
        a, b = body[i], body[i + 1]
        if isinstance(a, ast.Assign) and len(a.targets) == 1 and isinstance(a.targets[0], ast.Name) and \
                isinstance(b, (ast.Assign, ast.Return)) and b.value is not None:
            name = a.targets[0].id
            uses = _loads(b.value).count(name)
            later = [n for s in body[i + 2:] for n in _loads(s)]
            rebinds = isinstance(b, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in b.targets)
            if uses == 1 and (rebinds or isinstance(b, ast.Return) or name not in later):
                class Sub(ast.NodeTransformer):
                    def visit_Name(self, node):
                        if node.id == name and isinstance(node.ctx, ast.Load):
                            return copy.deepcopy(a.value)
                        return node
                b.value = Sub().visit(b.value)
                del body[i]
                merged += 1
                continue
        i += 1
    fwd.body = body
    return merged


def rename_locals(ctx: Ctx):
    fwd = ctx.forward
    names = {a.arg for a in fwd.args.args[1:]}
    for s in fwd.body:
        for n in ast.walk(s):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                names.add(n.id)
    pool = ["out", "y", "act", "z", "hidden", "tmp", "res"]
    mapping = {}
    for name in sorted(names):
        mapping[name] = pool[len(mapping) % len(pool)] + ("" if len(mapping) < len(pool) else str(len(mapping)))
    rename_names(fwd, mapping)


# ---- GEMM spellings -----------------------------------------------------------------------------

def linears(ctx: Ctx) -> list[tuple[str, ast.Assign]]:
    out = []
    for s in ctx.init.body:
        if isinstance(s, ast.Assign) and self_attr(s.targets[0]) and isinstance(s.value, ast.Call) and \
                nn_class(s.value) == "Linear":
            out.append((self_attr(s.targets[0]), s))
    return out


def gemm(ctx: Ctx, style: str) -> int:
    """Each nn.Linear `self.m` (called as self.m(e)) as hand-declared parameters and a GEMM
    spelled `style`; or a hand-declared weight's torch.matmul(x, self.w.T) in other spellings."""
    done = 0
    attrs = {n.attr for n in ast.walk(ctx.cls) if isinstance(n, ast.Attribute)}
    for attr, assign in linears(ctx):
        bound = bound_args("Linear", assign.value)
        fin, fout = src(bound["in_features"]), src(bound["out_features"])
        bias = bound.get("bias", ast.Constant(True))
        if style in ("sequential", "subclass"):
            if style == "sequential":
                assign.value = expr(f"nn.Sequential({src(assign.value)})")
                ctx.move_key(f"{attr}.", f"{attr}.0.")
            else:
                if not any(isinstance(n, ast.ClassDef) and n.name == "Dense" for n in ctx.tree.body):
                    index = ctx.tree.body.index(ctx.cls)
                    ctx.tree.body.insert(index, stmt(
                        "class Dense(nn.Linear):\n    def forward(self, input):\n        return super().forward(input)"))
                assign.value.func = expr("Dense")
            done += 1
            continue
        w, b = ("weight", "bias") if done == 0 and "weight" not in attrs and "bias" not in attrs \
            else (f"{attr}_weight", f"{attr}_bias")
        has_bias = not (isinstance(bias, ast.Constant) and bias.value is False)
        if style == "kn":
            lines = [f"self.{w} = nn.Parameter(torch.randn({fin}, {fout}))"]
            ctx.keys[f"{attr}.weight"] = (w, "t")
        else:
            lines = [f"self.{w} = nn.Parameter(torch.randn({fout}, {fin}) / {fin} ** 0.5)"]
            ctx.keys[f"{attr}.weight"] = w
        if has_bias:
            cond = "" if isinstance(bias, ast.Constant) else f" if {src(bias)} else None"
            lines.append(f"self.{b} = nn.Parameter(torch.zeros({fout})){cond}")
            ctx.keys[f"{attr}.bias"] = b
        i = ctx.init.body.index(assign)
        ctx.init.body[i:i + 1] = [stmt(line) for line in lines]
        conditional = has_bias and not isinstance(bias, ast.Constant)

        def spell(x: str) -> str | None:
            W, B = f"self.{w}", f"self.{b}"
            if style == "F":
                return f"{ctx.F('linear')}({x}, {W}, {B})" if has_bias else f"{ctx.F('linear')}({x}, {W})"
            if conditional:
                return None
            if style == "matmul":
                return f"({x}) @ {W}.t() + {B}" if has_bias else f"({x}) @ {W}.t()"
            if style == "addmm":
                return f"torch.addmm({B}, {x}, {W}.t())" if has_bias else f"torch.mm({x}, {W}.t())"
            if style == "torch.matmul":
                return f"torch.matmul({x}, {W}.T) + {B}" if has_bias else f"torch.matmul({x}, {W}.T)"
            if style == "kn":
                return f"({x}) @ {W} + {B}" if has_bias else f"({x}) @ {W}"
            return None

        class Call(ast.NodeTransformer):
            def visit_Call(self, node):
                self.generic_visit(node)
                if self_attr(node.func) == attr and len(node.args) == 1:
                    text = spell(src(node.args[0]))
                    if text is None:
                        raise NotApplicable(f"{style} of a conditional bias")
                    return expr(text)
                return node

        Call().visit(ctx.forward)
        done += 1
    if done == 0:
        # A hand-declared weight multiplied as torch.matmul(x, self.w.T) (14)
        class Matmul(ast.NodeTransformer):
            def visit_Call(self, node):
                nonlocal done
                self.generic_visit(node)
                if dotted(node.func) == "torch.matmul" and len(node.args) == 2 and \
                        isinstance(node.args[1], ast.Attribute) and node.args[1].attr in ("T", "t") and \
                        self_attr(node.args[1].value):
                    x, W = src(node.args[0]), src(node.args[1].value)
                    text = {"F": f"{ctx.F('linear')}({x}, {W})", "matmul": f"({x}) @ {W}.t()",
                            "addmm": f"torch.mm({x}, {W}.t())", "torch.matmul": f"({x}).matmul({W}.T)"}.get(style)
                    if text is None:
                        raise NotApplicable(style)
                    done += 1
                    return expr(text)
                return node

        Matmul().visit(ctx.forward)
    if not done:
        raise NotApplicable("no GEMM")
    return done


# ---- constructor, constants, get_inputs ---------------------------------------------------------

def super_call(ctx: Ctx, style: str):
    for i, s in enumerate(ctx.init.body):
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and isinstance(s.value.func, ast.Attribute) \
                and s.value.func.attr == "__init__":
            ctx.init.body[i] = stmt({"plain": "super().__init__()", "module": "nn.Module.__init__(self)"}[style])
            return 1
    raise NotApplicable("no super call")


RENAMES = {"in_features": "d_in", "input_size": "in_features", "out_features": "n_out", "hidden_size": "out_features",
           "output_size": "d_out", "batch_size": "B", "num_groups": "groups", "scaling_factor": "alpha",
           "scale_factor": "s", "bias_shape": "bshape", "negative_slope": "slope", "multiplier": "mult",
           "divisor": "denom", "constant": "c0", "bn_eps": "eps_bn", "eps": "epsilon", "momentum": "mom"}


def _renamed(names, avoid) -> dict:
    mapping, taken = {}, set(avoid)
    for n in names:
        new = RENAMES.get(n, n + "_")
        while new in taken or new in names and new not in mapping.values() and new != n and new in RENAMES:
            new += "_"
        if new in taken:
            new = n + "_v"
        mapping[n] = new
        taken.add(new)
    return mapping


def rename_init_args(ctx: Ctx):
    init = ctx.init
    names = [a.arg for a in init.args.args[1:]]
    mapping = _renamed(names, {"self", "torch", "nn", "F", ctx.f_alias})
    # keyword uses of the argument names in the body stay (nn.Linear(in_features=...) keywords are
    # keywords of the callee, not these names)
    rename_names(init, mapping)


def rename_constants(ctx: Ctx):
    consts = module_constants(ctx.tree)
    init_args = {a.arg for a in ctx.init.args.args}
    mapping = _renamed(consts, {"self", "torch", "nn", "F", ctx.f_alias} | init_args)
    for node in ctx.tree.body:
        if node is ctx.cls:
            for m in node.body:   # names the methods read as globals (not their own arguments)
                if isinstance(m, ast.FunctionDef):
                    own = {a.arg for a in m.args.args} | {a.arg for a in m.args.kwonlyargs}
                    rename_names(m, {k: v for k, v in mapping.items() if k not in own})
        else:
            rename_names(node, mapping)


def _constant_values(text: str) -> dict:
    ns: dict = {}
    exec(compile(text, "<respell>", "exec"), ns)
    return ns


def inline_constants(ctx: Ctx):
    """get_inputs() / get_init_inputs() with the constants written in as numbers, and the
    module-level constants they used dropped."""
    ns = _constant_values(ast.unparse(ctx.tree))
    consts = module_constants(ctx.tree)
    for fname in ("get_inputs", "get_init_inputs"):
        f = top_function(ctx.tree, fname)

        class Lit(ast.NodeTransformer):
            def visit_Name(self, node):
                if node.id in consts and isinstance(node.ctx, ast.Load):
                    return expr(repr(ns[node.id]))
                return node

        Lit().visit(f)
    used = {n.id for n in ast.walk(ctx.tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    ctx.tree.body = [n for n in ctx.tree.body if not (
        isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name) and n.targets[0].id in consts
        and n.targets[0].id not in used)]


def init_tuple(ctx: Ctx):
    for fname in ("get_inputs", "get_init_inputs"):
        f = top_function(ctx.tree, fname)
        ret = f.body[-1]
        if isinstance(ret, ast.Return) and isinstance(ret.value, ast.List):
            ret.value = ast.Tuple(elts=ret.value.elts, ctx=ast.Load())
            if len(ret.value.elts) == 0:
                ret.value = expr("()")


def config_dict(ctx: Ctx):
    """Model(config): the constructor's arguments passed as one dict."""
    init = ctx.init
    names = [a.arg for a in init.args.args[1:]]
    defaults = dict(zip(names[len(names) - len(init.args.defaults):], init.args.defaults))
    init.args.args = init.args.args[:1] + [ast.arg("config")]
    init.args.defaults = []
    lines = [stmt(f"{n} = config[{n!r}]") if n not in defaults else
             stmt(f"{n} = config.get({n!r}, {src(defaults[n])})") for n in names]
    first = 1 if init.body and isinstance(init.body[0], ast.Expr) and isinstance(init.body[0].value, ast.Constant) else 0
    init.body[first:first] = lines
    f = top_function(ctx.tree, "get_init_inputs")
    ret = f.body[-1]
    values = ret.value.elts
    ret.value = expr("[{" + ", ".join(f"{n!r}: {src(v)}" for n, v in zip(names, values)) + "}]")


def ctor_keywords(ctx: Ctx):
    """nn.Cls(a, b) in __init__ as nn.Cls(name_a=a, name_b=b)."""
    changed = 0
    for n in ast.walk(ctx.init):
        if isinstance(n, ast.Call) and nn_class(n) and hasattr(nn, nn_class(n)) and n.args:
            params = inspect.signature(getattr(nn, nn_class(n))).parameters.values()
            if any(q.kind in (q.VAR_POSITIONAL, q.VAR_KEYWORD) for q in params):
                continue   # (nn.Sequential(*layers))
            try:
                bound = bound_args(nn_class(n), n)
            except TypeError:
                continue
            n.args = []
            n.keywords = [ast.keyword(arg=k, value=v) for k, v in bound.items()]
            changed += 1
    if not changed:
        raise NotApplicable("no positional constructor arguments")


def trailing_defaults(ctx: Ctx):
    """The constructor's last arguments given defaults of the values get_init_inputs passes, and
    left out of get_init_inputs."""
    ns = _constant_values(ast.unparse(ctx.tree))
    values = list(ns["get_init_inputs"]())
    init = ctx.init
    names = [a.arg for a in init.args.args[1:]]
    k = max(1, len(names) // 2)
    if len(values) != len(names) or len(names) < 2:
        raise NotApplicable("arguments")
    keep = len(names) - k
    init.args.defaults = [expr(repr(v)) for v in values[keep:]]
    ret = top_function(ctx.tree, "get_init_inputs").body[-1]
    ret.value.elts = ret.value.elts[:keep]


def f_alias(ctx: Ctx, alias: str):
    """torch.nn.functional (imported or written out) under another alias, and F.x -> alias.x."""
    old = ctx.f_alias

    class Sub(ast.NodeTransformer):
        def visit_Attribute(self, node):
            self.generic_visit(node)
            d = dotted(node.value)
            if d in ("torch.nn.functional", old, "nn.functional"):
                return ast.Attribute(value=ast.Name(alias, ast.Load()), attr=node.attr, ctx=node.ctx)
            return node

    Sub().visit(ctx.tree)
    ctx.tree.body = [n for n in ctx.tree.body if not (isinstance(n, ast.Import) and any(
        a.name == "torch.nn.functional" for a in n.names))]
    if alias in ("fn", "nnf"):
        index = max(i for i, n in enumerate(ctx.tree.body) if isinstance(n, (ast.Import, ast.ImportFrom))) + 1
        ctx.tree.body.insert(index, stmt(f"from torch.nn import functional as {alias}"))
    ctx.f_alias = alias
    ensure_f_import(ctx.tree, alias)


def torch_alias(ctx: Ctx):
    """import torch as th; from torch import nn."""
    rename_names(ctx.tree, {"torch": "th"})
    for n in ctx.tree.body:
        if isinstance(n, ast.Import):
            for a in n.names:
                if a.name == "torch":
                    a.asname = "th"
                elif a.name.startswith("torch."):
                    pass
    # `import torch.nn as nn` binds nn only: fine; `import torch.nn.functional as F` too.


def unsqueeze_spelling(ctx: Ctx, style: str):
    changed = 0

    class Sub(ast.NodeTransformer):
        def visit_Call(self, node):
            nonlocal changed
            self.generic_visit(node)
            if isinstance(node.func, ast.Attribute) and node.func.attr in ("unsqueeze", "squeeze") and \
                    len(node.args) == 1 and isinstance(node.args[0], ast.Constant) and node.args[0].value == 1:
                x = src(node.func.value)
                changed += 1
                if node.func.attr == "unsqueeze":
                    return expr({"a": f"({x})[:, None, :]", "b": f"torch.unsqueeze({x}, dim=-2)",
                                 "c": f"({x}).view({x}.size(0), 1, -1)" if isinstance(node.func.value, ast.Name)
                                 else f"({x}).unsqueeze(1)"}[style])
                return expr({"a": f"({x}).flatten(1)", "b": f"torch.squeeze({x}, -2)",
                             "c": f"({x}).squeeze(dim=1)"}[style])
            return node

    Sub().visit(ctx.forward)
    if not changed:
        raise NotApplicable("no unsqueeze")


# ---- the axes -----------------------------------------------------------------------------------

def _ops(style):
    def run(ctx):
        if not rewrite_ops(ctx, lambda site: style):
            raise NotApplicable(f"no op has a {style} spelling")
    return run


def _random_ops(ctx):
    if not rewrite_ops(ctx, lambda site: ctx.rng.choice(STYLES)):
        raise NotApplicable("nothing rewritten")
    ensure_import(ctx.tree, "math")


def _inplace(style):
    def run(ctx):
        if not inplace(ctx, style):
            raise NotApplicable("no op to do in place")
    return run


def _chain(ctx):
    if not chain(ctx):
        raise NotApplicable("nothing to chain")


AXES = {
    "super()": lambda c: super_call(c, "plain"),
    "nn.Module.__init__": lambda c: super_call(c, "module"),
    "rename init args": rename_init_args,
    "rename constants": rename_constants,
    "inline constants": inline_constants,
    "tuple returns": init_tuple,
    "config dict": config_dict,
    "ctor keywords": ctor_keywords,
    "trailing defaults": trailing_defaults,
    "gemm F.linear": lambda c: gemm(c, "F"),
    "gemm @ .t()": lambda c: gemm(c, "matmul"),
    "gemm addmm": lambda c: gemm(c, "addmm"),
    "gemm torch.matmul": lambda c: gemm(c, "torch.matmul"),
    "gemm Sequential": lambda c: gemm(c, "sequential"),
    "gemm subclass": lambda c: gemm(c, "subclass"),
    "gemm weight (K, N)": lambda c: gemm(c, "kn"),
    "ops torch.*": _ops("torch"),
    "ops F.*": _ops("F"),
    "ops methods": _ops("method"),
    "ops modules": _ops("module"),
    "ops alternatives": _ops("alt"),
    "ops random": _random_ops,
    "in-place methods": _inplace("method"),
    "augmented / x.op_()": _inplace("augmented"),
    "ssa names": ssa,
    "renamed locals": rename_locals,
    "one-line chain": _chain,
    "F as fn": lambda c: f_alias(c, "fn"),
    "F as nnf import": lambda c: f_alias(c, "nnf"),
    "torch as th": torch_alias,
    "unsqueeze [:, None]": lambda c: unsqueeze_spelling(c, "a"),
    "unsqueeze torch.*": lambda c: unsqueeze_spelling(c, "b"),
    "unsqueeze view": lambda c: unsqueeze_spelling(c, "c"),
}
# Axes that must come before others in a combination (the ones that rename or alias what others
# recognize come last).
ORDER = list(AXES)
LATE = ("epilogue method", "ssa names", "renamed locals", "one-line chain", "F as fn", "F as nnf import",
        "inline constants", "rename constants", "rename init args", "config dict", "trailing defaults",
        "star args", "torch.nn written out", "torch as th")


def ordered(axes) -> list[str]:
    early = [a for a in axes if a not in LATE]
    late = [a for a in LATE if a in axes]
    return early + late


def own_shapes(text: str) -> dict:
    ns = _constant_values(text)
    with torch.device("meta"):
        model = ns["Model"](*ns["get_init_inputs"]())
    return {k: tuple(v.shape) for k, v in [*model.named_parameters(recurse=False), *model.named_buffers(recurse=False)]}


def scalar_attrs(text: str, kinds=(int, float, bool)) -> set:
    """The Model's attributes that are Python numbers (built on the meta device)."""
    ns = _constant_values(text)
    with torch.device("meta"):
        model = ns["Model"](*ns["get_init_inputs"]())
    return {k for k, v in vars(model).items() if isinstance(v, kinds) and not k.startswith("_")}


def respell(text: str, axes: list[str], seed: int = 0, scalars: set | None = None) -> tuple[str, dict, list]:
    """`text` rewritten by each of `axes` in turn; (new text, state key moves, axes that applied).
    Raises NotApplicable where none of them applied."""
    tree = parse(text)
    ctx = Ctx(tree, random.Random(seed), scalar_attrs(text) if scalars is None else scalars)
    ctx.floats = scalar_attrs(text, float) if scalars is None else set()
    ctx.shapes = own_shapes(text)
    if any(isinstance(n, ast.Import) and any(a.name == "torch.nn.functional" and a.asname == "F" for a in n.names)
           for n in tree.body):
        ctx.f_alias = "F"
    ensure_f_import(tree, "F")
    for axis in ordered(axes):
        if axis.startswith("gemm") and any(a.startswith("gemm") for a in ctx.applied):
            continue   # (one spelling of the GEMM at a time)
        snapshot = copy.deepcopy(ctx.tree), dict(ctx.keys), ctx.f_alias, ctx.counter
        try:
            AXES[axis](ctx)
            ctx.applied.append(axis)
            # (each axis reads a fresh tree: no node shared between two places)
            ctx.tree = ast.parse(ast.unparse(ast.fix_missing_locations(ctx.tree)))
        except NotApplicable:
            ctx.tree, ctx.keys, ctx.f_alias, ctx.counter = snapshot
    if not ctx.applied:
        raise NotApplicable(", ".join(axes))
    ast.fix_missing_locations(ctx.tree)
    return ast.unparse(ctx.tree) + "\n", ctx.keys, ctx.applied



# ---- more axes: spelled-out ops, helpers, containers, stored scalars -----------------------------

def spelled_out(site: Site, ctx: Ctx) -> ast.expr | None:
    """The op written out from more elementary ones (where its operand is a name, so that it is
    not computed twice)."""
    if not isinstance(site.x, ast.Name):
        return None
    x, F = site.x.id, ctx.F
    P = {k: (src(v) if isinstance(v, ast.AST) else repr(v)) for k, v in site.params.items()}
    if site.kind == "unary":
        return {"sigmoid": f"1.0 / (1.0 + torch.exp(-{x}))",
                "gelu": f"0.5 * {x} * (1.0 + torch.erf({x} / math.sqrt(2.0)))",
                "relu": f"torch.maximum({x}, torch.zeros_like({x}))",
                "tanh": f"(torch.exp(2.0 * {x}) - 1.0) / (torch.exp(2.0 * {x}) + 1.0)",
                "mish": f"{x} * torch.tanh(torch.log1p(torch.exp({x})))"}.get(site.op) and expr(
            {"sigmoid": f"1.0 / (1.0 + torch.exp(-{x}))",
             "gelu": f"0.5 * {x} * (1.0 + torch.erf({x} / math.sqrt(2.0)))",
             "relu": f"torch.maximum({x}, torch.zeros_like({x}))",
             "tanh": f"(torch.exp(2.0 * {x}) - 1.0) / (torch.exp(2.0 * {x}) + 1.0)",
             "mish": f"{x} * torch.tanh(torch.log1p(torch.exp({x})))"}[site.op])
    if site.kind == "leaky":
        return expr(f"torch.clamp({x}, min=0.0) + {P.get('negative_slope', '0.01')} * torch.clamp({x}, max=0.0)")
    if site.kind in ("hardtanh", "clamp"):
        lo = P.get("min_val", P.get("min", "-1.0"))
        hi = P.get("max_val", P.get("max", "1.0"))
        return expr(f"({x}).clamp_min({lo}).clamp_max({hi})")
    if site.kind == "softmax":
        d = P.get("dim", "1")
        return expr(f"torch.exp({x} - {x}.amax({d}, keepdim=True)) / "
                    f"torch.exp({x} - {x}.amax({d}, keepdim=True)).sum({d}, keepdim=True)")
    if site.kind == "reduce":
        d, k = P["dim"], P.get("keepdim", "False")
        if site.op == "mean" and isinstance(site.params["dim"], (ast.Constant, ast.UnaryOp)):
            return expr(f"{x}.sum({d}, keepdim={k}) / {x}.shape[{d}]")
        if site.op == "logsumexp":
            return expr(f"torch.log(torch.exp({x}).sum(dim={d}, keepdim={k}))")
        return None
    if site.kind == "binary":
        o = P["other"]
        if site.op == "sub":
            return expr(f"torch.add({x}, {o}, alpha=-1)") if is_tensor(site.params["other"], ctx) else \
                expr(f"torch.sub({x}, {o})")
        if site.op == "div":
            return expr(f"torch.true_divide({x}, {o})")
        if site.op == "mul":
            return expr(f"torch.multiply({x}, {o})")
        if site.op == "add":
            return expr(f"torch.add({x}, {o}, alpha=1)")
    return None


def _spelled_out(ctx):
    if not rewrite_ops(ctx, lambda site: "spelled"):
        raise NotApplicable("nothing to spell out")
    ensure_import(ctx.tree, "math")


def ensure_import(tree, name):
    if not any(isinstance(n, ast.Import) and any(a.name == name for a in n.names) for n in tree.body):
        tree.body.insert(0, stmt(f"import {name}"))


_emit = emit


def emit(site, style, ctx):   # noqa: F811 - the spelled-out style added to the table above
    if style == "spelled":
        return spelled_out(site, ctx)
    if style == "in forward":
        return made_in_forward(site, ctx)
    if style == "helper":
        return helper(site, ctx)
    if site.kind == "dropout":
        m = f"self.{site.module}"
        if style == "F":
            return expr(f"{ctx.F('dropout')}({src(site.x)}, {m}.p, {m}.training)")
        if style == "torch":
            return expr(f"{ctx.F('dropout')}({src(site.x)}, p={m}.p, training=self.training)")
        return None
    return _emit(site, style, ctx)


def made_in_forward(site, ctx):
    """An nn module built in forward and called at once: nn.ReLU()(x)."""
    x = src(site.x)
    P = {k: (src(v) if isinstance(v, ast.AST) else repr(v)) for k, v in site.params.items()}
    if site.module:
        return None
    if site.kind == "unary":
        return expr(f"nn.{UNARY[site.op][4]}()({x})")
    if site.kind == "softmax":
        return expr(f"nn.Softmax(dim={P.get('dim', '1')})({x})")
    if site.kind == "leaky":
        return expr(f"nn.LeakyReLU({P.get('negative_slope', '0.01')})({x})")
    if site.kind in ("hardtanh", "clamp"):
        lo = P.get("min_val", P.get("min", "-1.0"))
        hi = P.get("max_val", P.get("max", "1.0"))
        return expr(f"nn.Hardtanh({lo}, {hi})({x})")
    return None


def helper(site, ctx):
    """The op in a function of the file's own (module level), called with its operand and the
    op's parameters: def _op3(t, a): return ..."""
    if site.kind in ("binary", "minimum"):
        return None
    names = sorted(site.params)
    args = [f"a_{n}" for n in names]
    inner = Site(site.kind, site.op, ast.Name("t", ast.Load()),
                 {n: ast.Name(a, ast.Load()) for n, a in zip(names, args)}, module=None)
    if site.kind in ("pool", "norm", "dropout"):
        return None
    body = _emit(inner, "F", ctx) or _emit(inner, "torch", ctx)
    if body is None:
        return None
    name = ctx.fresh(f"_{site.op}_fn")
    fn = stmt(f"def {name}(t{''.join(', ' + a for a in args)}):\n    return {src(body)}")
    ctx.tree.body.insert(ctx.tree.body.index(ctx.cls), fn)
    values = [src(site.params[n]) if isinstance(site.params[n], ast.AST) else repr(site.params[n]) for n in names]
    return expr(f"{name}({src(site.x)}{''.join(', ' + v for v in values)})")


_recognize_call = recognize_call


def recognize_call(call, ctx, modules, extreme):   # noqa: F811 - Dropout modules too
    attr = self_attr(call.func)
    if not extreme and attr is not None and attr in modules and len(call.args) == 1 and \
            nn_class(modules[attr]) == "Dropout":
        return Site("dropout", "dropout", call.args[0], {}, module=attr)
    return _recognize_call(call, ctx, modules, extreme)


def _style(style):
    def run(ctx):
        if not rewrite_ops(ctx, lambda site: style):
            raise NotApplicable(style)
    return run


def gemm_module_params(ctx: Ctx):
    """The Linear kept, its parameters read in forward: F.linear(x, self.m.weight, self.m.bias),
    torch.addmm(self.m.bias, x, self.m.weight.t()), self.m.forward(x)."""
    done = 0
    for attr, assign in linears(ctx):
        bound = bound_args("Linear", assign.value)
        bias = bound.get("bias", ast.Constant(True))
        has_bias = not (isinstance(bias, ast.Constant) and bias.value is False)
        conditional = has_bias and not isinstance(bias, ast.Constant)
        choice = ctx.rng.choice(["F", "addmm", "forward", "matmul"])
        if conditional and choice in ("addmm", "matmul"):
            choice = "F"
        m = f"self.{attr}"

        class Call(ast.NodeTransformer):
            def visit_Call(self, node):
                self.generic_visit(node)
                if self_attr(node.func) == attr and len(node.args) == 1:
                    x = src(node.args[0])
                    return expr({"F": f"{ctx.F('linear')}({x}, {m}.weight, {m}.bias)",
                                 "addmm": f"torch.addmm({m}.bias, {x}, {m}.weight.t())" if has_bias
                                 else f"{x} @ {m}.weight.T",
                                 "forward": f"{m}.forward({x})",
                                 "matmul": f"torch.matmul({x}, {m}.weight.t()) + {m}.bias" if has_bias
                                 else f"torch.matmul({x}, {m}.weight.t())"}[choice])
                return node

        Call().visit(ctx.forward)
        done += 1
    if not done:
        raise NotApplicable("no Linear")


def gemm_modulelist(ctx: Ctx):
    """The Linears kept in an nn.ModuleList (self.layers[i](x)) or nn.ModuleDict (self.layers['fc'])."""
    lins = linears(ctx)
    if not lins:
        raise NotApplicable("no Linear")
    as_dict = ctx.rng.random() < 0.5
    index = {attr: i for i, (attr, _) in enumerate(lins)}
    first = ctx.init.body.index(lins[0][1])
    for attr, assign in lins:
        ctx.init.body.remove(assign)
        ctx.move_key(f"{attr}.", f"layers.{attr if as_dict else index[attr]}.")
    items = ", ".join((f"{attr!r}: " if as_dict else "") + src(a.value) for attr, a in lins)
    ctx.init.body.insert(first, stmt(f"self.layers = nn.ModuleDict({{{items}}})" if as_dict
                                     else f"self.layers = nn.ModuleList([{items}])"))

    class Call(ast.NodeTransformer):
        def visit_Call(self, node):
            self.generic_visit(node)
            a = self_attr(node.func)
            if a in index:
                node.func = expr(f"self.layers[{a!r}]" if as_dict else f"self.layers[{index[a]}]")
            return node

    Call().visit(ctx.forward)


def gemm_reset_parameters(ctx: Ctx):
    """Hand-declared parameters made with torch.empty and initialized in reset_parameters()
    (nn.init.kaiming_uniform_, as nn.Linear does), multiplied by F.linear."""
    lins = linears(ctx)
    if not lins or len(lins) > 1:
        raise NotApplicable("one Linear")
    attr, assign = lins[0]
    bound = bound_args("Linear", assign.value)
    bias = bound.get("bias", ast.Constant(True))
    if not isinstance(bias, ast.Constant):
        raise NotApplicable("conditional bias")
    has_bias = bias.value is not False
    fin, fout = src(bound["in_features"]), src(bound["out_features"])
    w, b = f"{attr}_w", f"{attr}_b"
    i = ctx.init.body.index(assign)
    lines = [f"self.{w} = nn.Parameter(torch.empty({fout}, {fin}))"]
    ctx.keys[f"{attr}.weight"] = w
    if has_bias:
        lines.append(f"self.{b} = nn.Parameter(torch.empty({fout}))")
        ctx.keys[f"{attr}.bias"] = b
    else:
        lines.append(f"self.register_parameter({b!r}, None)")
    lines.append("self.reset_parameters()")
    ctx.init.body[i:i + 1] = [stmt(line) for line in lines]
    ensure_import(ctx.tree, "math")
    reset = ("def reset_parameters(self):\n"
             f"    nn.init.kaiming_uniform_(self.{w}, a=math.sqrt(5))\n"
             f"    if self.{b} is not None:\n"
             f"        bound = 1 / math.sqrt(self.{w}.size(1))\n"
             f"        nn.init.uniform_(self.{b}, -bound, bound)")
    ctx.cls.body.insert(ctx.cls.body.index(ctx.init) + 1, stmt(reset))

    class Call(ast.NodeTransformer):
        def visit_Call(self, node):
            self.generic_visit(node)
            if self_attr(node.func) == attr and len(node.args) == 1:
                return expr(f"{ctx.F('linear')}({src(node.args[0])}, self.{w}, self.{b})")
            return node

    Call().visit(ctx.forward)


def _linear_run_taken(ctx: Ctx, shortest: int):
    """The first run of module calls from the Linear's on in forward (x = self.a(x); x = self.b(x)
    ...), at least `shortest` long, whose modules forward calls nowhere after it: their __init__
    assignments taken out. (i, j, run, attrs, parts, first): the run is forward's statements i..j-1,
    attrs its modules in call order, parts their constructor source by name, first the index in
    __init__ where the first of them stood; None where there is no such run."""
    modules = module_classes(ctx)
    body = ctx.forward.body
    for i, s in enumerate(body):
        run = []
        j = i
        while j < len(body):
            t = body[j]
            if isinstance(t, ast.Assign) and isinstance(t.value, ast.Call) and self_attr(t.value.func) in modules \
                    and len(t.value.args) == 1 and isinstance(t.value.args[0], ast.Name) and \
                    isinstance(t.targets[0], ast.Name) and (not run or t.value.args[0].id == run[-1].targets[0].id):
                run.append(t)
                j += 1
            else:
                break
        if len(run) >= shortest and nn_class(modules[self_attr(run[0].value.func)]) == "Linear":
            attrs = [self_attr(t.value.func) for t in run]
            calls = {self_attr(n) for later in body[j:] for n in ast.walk(later) if self_attr(n)}
            if set(attrs) & calls:
                continue
            assigns = [n for n in ctx.init.body if isinstance(n, ast.Assign) and self_attr(n.targets[0]) in attrs]
            first = ctx.init.body.index(assigns[0])
            for a in assigns:
                ctx.init.body.remove(a)
            parts = {self_attr(a.targets[0]): src(a.value) for a in assigns}
            return i, j, run, attrs, parts, first
    return None


def _run_as_net(ctx: Ctx, i: int, j: int, run: list):
    """Forward's statements i..j-1 (the run) as one call of self.net."""
    ctx.forward.body[i:j] = [ast.Assign(targets=[run[-1].targets[0]],
                                        value=expr(f"self.net({src(run[0].value.args[0])})"), lineno=0)]


def sequential_chain(ctx: Ctx):
    """The Linear and the module calls right after it (x = self.a(x); x = self.b(x)) as one
    nn.Sequential."""
    taken = _linear_run_taken(ctx, 2)
    if taken is None:
        raise NotApplicable("no run of module calls after the Linear")
    i, j, run, attrs, parts, first = taken
    ctx.init.body.insert(first, stmt(f"self.net = nn.Sequential({', '.join(parts[a] for a in attrs)})"))
    for k, a in enumerate(attrs):
        ctx.move_key(f"{a}.", f"net.{k}.")
    _run_as_net(ctx, i, j, run)


def scalars_stored(ctx: Ctx, how: str):
    """A Python-number attribute (self.s = s) kept as a 0-d buffer / frozen parameter instead."""
    done = 0
    for i, s in enumerate(ctx.init.body):
        if isinstance(s, ast.Assign) and self_attr(s.targets[0]) in ctx.floats and \
                self_attr(s.targets[0]) not in ("training",):
            a = self_attr(s.targets[0])
            value = src(s.value)
            ctx.init.body[i] = stmt(
                f"self.register_buffer({a!r}, torch.tensor(float({value})))" if how == "buffer" else
                f"self.{a} = nn.Parameter(torch.tensor(float({value})), requires_grad=False)")
            ctx.keys.setdefault("__new__", []).append(a)
            done += 1
    if not done:
        raise NotApplicable("no scalar attribute")
    ctx.scalars -= ctx.floats


def keepdim_by_view(ctx: Ctx):
    """torch.sum(x, 1, keepdim=True) as x.sum(1).unsqueeze(1) / [:, None] / .view(-1, 1), and
    keepdim=False as keepdim=True then .squeeze(1)."""
    def choose(site):
        return "keepview" if site.kind in ("reduce", "extreme") else None

    def keepview(site, ctx):
        P = {k: (src(v) if isinstance(v, ast.AST) else repr(v)) for k, v in site.params.items()}
        x, d, k = src(site.x), P["dim"], P.get("keepdim", "False")
        if d not in ("1", "-1") or k not in ("True", "False"):
            return None
        core = f"torch.{site.op}({x}, dim={d})" + ("[0]" if site.kind == "extreme" else "")
        if k == "True":
            return expr(ctx.rng.choice([f"{core}.unsqueeze(1)", f"{core}[:, None]", f"{core}.view(-1, 1)",
                                        f"{core}.reshape({core}.shape[0], 1)"]))
        core = f"torch.{site.op}({x}, dim={d}, keepdim=True)" + ("[0]" if site.kind == "extreme" else "")
        return expr(ctx.rng.choice([f"{core}.squeeze(1)", f"{core}.view(-1)", f"{core}[:, 0]",
                                    f"{core}.flatten()"]))

    global emit
    saved = emit
    emit = lambda site, style, c: keepview(site, c) if style == "keepview" else saved(site, style, c)
    try:
        if not rewrite_ops(ctx, choose):
            raise NotApplicable("no reduction")
    finally:
        emit = saved


def tuple_dims(ctx: Ctx):
    class Sub(ast.NodeTransformer):
        n = 0

        def visit_Call(self, node):
            self.generic_visit(node)
            site = recognize_call(node, ctx, {}, extreme=False)
            if site is not None and site.kind == "reduce":
                for k in node.keywords:
                    if k.arg == "dim" and isinstance(k.value, (ast.Constant, ast.UnaryOp)):
                        k.value = expr(f"({src(k.value)},)" if Sub.n % 2 == 0 else f"[{src(k.value)}]")
                        Sub.n += 1
                if isinstance(node.func, ast.Attribute) and dotted(node.func) and dotted(node.func).startswith("torch.") \
                        and len(node.args) >= 2 and isinstance(node.args[1], (ast.Constant, ast.UnaryOp)):
                    node.args[1] = expr(f"({src(node.args[1])},)")
                    Sub.n += 1
            return node

    s = Sub()
    s.visit(ctx.forward)
    if not Sub.n:
        raise NotApplicable("no reduction dim")


def clone_detach(ctx: Ctx):
    n = 0

    class Sub(ast.NodeTransformer):
        def visit_Call(self, node):
            nonlocal n
            self.generic_visit(node)
            if isinstance(node.func, ast.Attribute) and node.func.attr == "detach" and \
                    isinstance(node.func.value, ast.Call) and isinstance(node.func.value.func, ast.Attribute) \
                    and node.func.value.func.attr == "clone":
                x = src(node.func.value.func.value)
                n += 1
                return expr(ctx.rng.choice([f"{x}.detach().clone()", f"torch.clone({x}).detach()",
                                            f"{x}.clone().detach_()"]))
            return node

    Sub().visit(ctx.forward)
    if not n:
        raise NotApplicable("no clone().detach()")


def annotations(ctx: Ctx):
    fwd = ctx.forward
    for a in fwd.args.args[1:]:
        a.annotation = expr("torch.Tensor")
    fwd.returns = expr("torch.Tensor")
    for a in ctx.init.args.args[1:]:
        a.annotation = None
    fwd.body = [s for s in fwd.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))] or [
        stmt("pass")]


def pool_by_view(ctx: Ctx):
    """self.pool(x.unsqueeze(1)).squeeze(1) of a MaxPool1d / AvgPool1d (stride its kernel) as the
    features viewed (batch, features // k, k) and reduced over the last."""
    modules = module_classes(ctx)
    n = 0

    class Sub(ast.NodeTransformer):
        def visit_Call(self, node):
            nonlocal n
            self.generic_visit(node)
            if isinstance(node.func, ast.Attribute) and node.func.attr == "squeeze" and \
                    isinstance(node.func.value, ast.Call):
                inner = node.func.value
                a = self_attr(inner.func)
                if a in modules and nn_class(modules[a]) in ("MaxPool1d", "AvgPool1d") and len(inner.args) == 1 \
                        and isinstance(inner.args[0], ast.Call) and isinstance(inner.args[0].func, ast.Attribute) \
                        and inner.args[0].func.attr == "unsqueeze" and isinstance(inner.args[0].func.value, ast.Name):
                    bound = bound_args(nn_class(modules[a]), modules[a])
                    if set(bound) != {"kernel_size"}:
                        return node
                    k = ctx.fresh("_pool_k")
                    ctx.add_init(f"self.{k} = {src(bound['kernel_size'])}")
                    x = inner.args[0].func.value.id
                    red = "amax(-1)" if nn_class(modules[a]) == "MaxPool1d" else "mean(-1)"
                    n += 1
                    return expr(f"{x}.view({x}.size(0), -1, self.{k}).{red}")
            return node

    Sub().visit(ctx.forward)
    if not n:
        raise NotApplicable("no pooling")


def swish_as_silu(ctx: Ctx):
    n = 0

    class Sub(ast.NodeTransformer):
        def visit_BinOp(self, node):
            nonlocal n
            self.generic_visit(node)
            if isinstance(node.op, ast.Mult):
                for a, b in ((node.left, node.right), (node.right, node.left)):
                    if isinstance(a, ast.Name) and isinstance(b, ast.Call) and \
                            dotted(b.func) in ("torch.sigmoid",) and len(b.args) == 1 and \
                            isinstance(b.args[0], ast.Name) and b.args[0].id == a.id:
                        n += 1
                        return expr(ctx.rng.choice([f"{ctx.F('silu')}({a.id})", f"nn.SiLU()({a.id})",
                                                    f"{a.id}.mul({a.id}.sigmoid())"]))
            return node

    Sub().visit(ctx.forward)
    if not n:
        raise NotApplicable("no swish")


AXES.update({
    "spelled out": _spelled_out,
    "modules made in forward": _style("in forward"),
    "helper functions": _style("helper"),
    "gemm via the Linear's params": gemm_module_params,
    "gemm ModuleList/Dict": gemm_modulelist,
    "gemm reset_parameters": gemm_reset_parameters,
    "Sequential chain": sequential_chain,
    "scalars as buffers": lambda c: scalars_stored(c, "buffer"),
    "scalars as frozen parameters": lambda c: scalars_stored(c, "param"),
    "keepdim by view": keepdim_by_view,
    "tuple dims": tuple_dims,
    "clone/detach order": clone_detach,
    "annotations": annotations,
    "pool by view": pool_by_view,
    "swish as silu": swish_as_silu,
})


def gemm_other(ctx: Ctx, style: str):
    """The Linear's GEMM in rarer spellings, its parameters hand-declared: torch.einsum, the
    product transposed ((W @ x.T).T), the bias added apart (F.linear(x, W) + b), W.T spelled
    .transpose(0, 1) / .permute(1, 0) / .mT."""
    lins = linears(ctx)
    if not lins:
        raise NotApplicable("no Linear")
    for attr, assign in lins:
        bound = bound_args("Linear", assign.value)
        bias = bound.get("bias", ast.Constant(True))
        if not isinstance(bias, ast.Constant):
            bias = ast.Constant(True)   # the bias=bias of the corpus is True where get_init_inputs leaves it out
        has_bias = bias.value is not False
        fin, fout = src(bound["in_features"]), src(bound["out_features"])
        w, b = f"{attr}_weight", f"{attr}_bias"
        lines = [f"self.{w} = nn.Parameter(torch.randn({fout}, {fin}))"]
        ctx.keys[f"{attr}.weight"] = w
        if has_bias:
            lines.append(f"self.{b} = nn.Parameter(torch.randn({fout}))")
            ctx.keys[f"{attr}.bias"] = b
        i = ctx.init.body.index(assign)
        ctx.init.body[i:i + 1] = [stmt(line) for line in lines]
        W, B = f"self.{w}", f"self.{b}"
        tail = f" + {B}" if has_bias else ""

        def spell(x):
            if style == "einsum":
                return f"torch.einsum('bi,oi->bo', {x}, {W}){tail}"
            if style == "transposed":
                return f"({W} @ ({x}).t()).t(){tail}"
            if style == "split bias":
                return f"{ctx.F('linear')}({x}, {W}){tail}"
            t = ctx.rng.choice([f"{W}.transpose(0, 1)", f"{W}.permute(1, 0)", f"{W}.mT", f"torch.transpose({W}, 0, 1)"])
            return f"({x}).mm({t}){tail}"

        class Call(ast.NodeTransformer):
            def visit_Call(self, node):
                self.generic_visit(node)
                if self_attr(node.func) == attr and len(node.args) == 1:
                    return expr(spell(src(node.args[0])))
                return node

        Call().visit(ctx.forward)


GROUP_NORM_BY_HAND = """
def group_norm(x, groups, weight, bias, eps):
    n, c = x.shape
    g = x.reshape(n, groups, c // groups)
    mean = g.mean(dim=-1, keepdim=True)
    var = g.var(dim=-1, unbiased=False, keepdim=True)
    g = (g - mean) * torch.rsqrt(var + eps)
    return g.reshape(n, c) * weight + bias
"""


def group_norm_by_hand(ctx: Ctx):
    """nn.GroupNorm's call as a function of the file's own reading the module's parameters."""
    modules = module_classes(ctx)
    n = 0

    class Sub(ast.NodeTransformer):
        def visit_Call(self, node):
            nonlocal n
            self.generic_visit(node)
            a = self_attr(node.func)
            if a in modules and nn_class(modules[a]) == "GroupNorm" and len(node.args) == 1:
                n += 1
                m = f"self.{a}"
                return expr(f"group_norm({src(node.args[0])}, {m}.num_groups, {m}.weight, {m}.bias, {m}.eps)")
            return node

    Sub().visit(ctx.forward)
    if not n:
        raise NotApplicable("no GroupNorm")
    ctx.tree.body.insert(ctx.tree.body.index(ctx.cls), stmt(GROUP_NORM_BY_HAND))


def epilogue_method(ctx: Ctx):
    """What forward does after its first GEMM in a method of its own: return self._epilogue(x)."""
    fwd = ctx.forward
    body = [s for s in fwd.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    for i, s in enumerate(body):
        if isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name) and any(
                isinstance(c, ast.Call) and (nn_class(module_classes(ctx).get(self_attr(c.func)) or ast.Call(
                    func=ast.Name("x"), args=[], keywords=[])) == "Linear") for c in ast.walk(s.value)):
            rest = body[i + 1:]
            if not rest or not isinstance(rest[-1], ast.Return):
                break
            name = s.targets[0].id
            before = {t.id for b in body[:i + 1] for t in ast.walk(b) if isinstance(t, ast.Name)
                      and isinstance(t.ctx, ast.Store)} | {a.arg for a in fwd.args.args[1:]}
            live = sorted({n for r in rest for n in _loads(r)} & before)
            m = stmt(f"def _epilogue(self, {', '.join(live)}):\n    pass")
            m.body = rest
            ctx.cls.body.append(m)
            fwd.body = body[:i + 1] + [stmt(f"return self._epilogue({', '.join(live)})")]
            return
    raise NotApplicable("no GEMM statement")


def star_args(ctx: Ctx):
    """__init__(self, *args) unpacking its arguments."""
    init = ctx.init
    names = [a.arg for a in init.args.args[1:]]
    if init.args.defaults:
        raise NotApplicable("defaults")
    init.args.args = init.args.args[:1]
    init.args.vararg = ast.arg("args")
    first = 1 if init.body and isinstance(init.body[0], ast.Expr) and isinstance(init.body[0].value, ast.Constant) else 0
    init.body.insert(first, stmt(f"({', '.join(names)},) = args"))   # (before config dict's reads of them)


def no_nn_alias(ctx: Ctx):
    """torch.nn written out (class Model(torch.nn.Module), torch.nn.Linear, ...), no `nn` import."""
    class Sub(ast.NodeTransformer):
        def visit_Name(self, node):
            if node.id == "nn":
                return ast.copy_location(expr("torch.nn"), node)
            return node

    Sub().visit(ctx.tree)
    ctx.tree.body = [n for n in ctx.tree.body if not (isinstance(n, ast.Import) and any(
        a.name == "torch.nn" for a in n.names))]


def max_unpacked(ctx: Ctx):
    """x = torch.max(x, dim=1, keepdim=True)[0] as x, _ = torch.max(...) / values, idx = x.max(...)."""
    fwd = ctx.forward
    n = 0
    for i, s in enumerate(fwd.body):
        if isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name):
            site = recognize(s.value, ctx, {})
            if site is not None and site.kind == "extreme" and src(s.value).endswith(("[0]", ".values")):
                call = s.value.value
                t = s.targets[0].id
                s.targets = [expr(f"({t}, _)") if n % 2 == 0 else expr(f"({t}, {t}_idx)")]
                s.targets[0].ctx = ast.Store()
                for e in s.targets[0].elts:
                    e.ctx = ast.Store()
                s.value = call
                n += 1
    if not n:
        raise NotApplicable("no max / min")


AXES.update({
    "gemm einsum": lambda c: gemm_other(c, "einsum"),
    "gemm (W @ x.T).T": lambda c: gemm_other(c, "transposed"),
    "gemm F.linear + bias": lambda c: gemm_other(c, "split bias"),
    "gemm x.mm(W.transpose)": lambda c: gemm_other(c, "mm"),
    "group norm by hand": group_norm_by_hand,
    "epilogue method": epilogue_method,
    "star args": star_args,
    "torch.nn written out": no_nn_alias,
    "max unpacked": max_unpacked,
})

# ---- session 60: ops held in attributes, other call forms, control flow, containers -------------

def _custom(ctx: Ctx, make, what: str):
    """rewrite_ops with `make(site, ctx)` as the style (None: the site kept)."""
    global emit
    saved = emit
    emit = lambda site, style, c: make(site, c) if style == "custom" else saved(site, style, c)
    try:
        if not rewrite_ops(ctx, lambda site: "custom"):
            raise NotApplicable(what)
    finally:
        emit = saved


def _hoistable(site: Site) -> bool:
    """The site's parameters can be read in __init__ (numbers, self.<attr>): no local of forward."""
    return all(not (isinstance(n, ast.Name) and n.id != "self")
               for v in site.params.values() if isinstance(v, ast.AST) for n in ast.walk(v))


def _P(site):
    return {k: (src(v) if isinstance(v, ast.AST) else repr(v)) for k, v in site.params.items()}


# Functions an attribute may hold for a unary op (self.act = F.gelu).
ACT_FUNCTIONS = {"relu": ["F.relu", "torch.relu", "nn.functional.relu"], "sigmoid": ["torch.sigmoid", "F.sigmoid"],
                 "tanh": ["torch.tanh", "F.tanh"], "gelu": ["F.gelu", "nn.functional.gelu"],
                 "mish": ["F.mish", "nn.functional.mish"]}


def act_attribute(ctx: Ctx):
    """A unary op's function kept in an attribute: self.act = F.gelu; x = self.act(x)."""
    def make(site, ctx):
        if site.kind != "unary":
            return None
        fn = ctx.rng.choice(ACT_FUNCTIONS[site.op]).replace("F.", f"{ctx.f_alias}.")
        name = ctx.fresh("act")
        ctx.add_init(f"self.{name} = {fn}")
        return expr(f"self.{name}({src(site.x)})")
    _custom(ctx, make, "no unary op")


ACT_TABLE = """
ACTIVATIONS = {'relu': nn.ReLU, 'sigmoid': nn.Sigmoid, 'tanh': nn.Tanh, 'gelu': nn.GELU, 'mish': nn.Mish,
               'leaky_relu': nn.LeakyReLU, 'hardtanh': nn.Hardtanh, 'softmax': nn.Softmax}
"""


def act_by_name(ctx: Ctx):
    """The activation chosen by a string from a module-level dict of nn classes:
    self.act = ACTIVATIONS[activation](...)."""
    def make(site, ctx):
        if not _hoistable(site) or site.module:
            return None
        P = _P(site)
        args = {"unary": "", "leaky": P.get("negative_slope", ""),
                "softmax": f"dim={P.get('dim', '1')}"}
        if site.kind in ("hardtanh", "clamp"):
            key, a = "hardtanh", f"{P.get('min_val', P.get('min', '-1.0'))}, {P.get('max_val', P.get('max', '1.0'))}"
        elif site.kind in args:
            key, a = (site.op if site.kind == "unary" else {"leaky": "leaky_relu"}.get(site.kind, site.kind)), \
                args[site.kind]
        else:
            return None
        name = ctx.fresh("activation")
        ctx.add_init(f"self.{name} = ACTIVATIONS[{key!r}]({a})")
        return expr(f"self.{name}({src(site.x)})")
    _custom(ctx, make, "no activation")
    ctx.tree.body.insert(ctx.tree.body.index(ctx.cls), stmt(ACT_TABLE))


def act_partial(ctx: Ctx):
    """An op with parameters as functools.partial: self.act = functools.partial(F.leaky_relu,
    negative_slope=0.2)."""
    def make(site, ctx):
        if not _hoistable(site):
            return None
        P, F = _P(site), ctx.F
        if site.kind == "leaky":
            call = f"{F('leaky_relu')}, negative_slope={P.get('negative_slope', '0.01')}"
        elif site.kind in ("hardtanh", "clamp"):
            lo, hi = P.get("min_val", P.get("min", "-1.0")), P.get("max_val", P.get("max", "1.0"))
            call = ctx.rng.choice([f"{F('hardtanh')}, min_val={lo}, max_val={hi}", f"torch.clamp, min={lo}, max={hi}"])
        elif site.kind == "softmax":
            call = f"{F('softmax')}, dim={P.get('dim', '1')}"
        elif site.kind == "reduce" and site.op in ("sum", "mean", "logsumexp"):
            call = f"torch.{site.op}, dim={P['dim']}" + (f", keepdim={P['keepdim']}" if "keepdim" in P else "")
        elif site.kind == "unary" and site.op == "gelu":
            call = f"{F('gelu')}, approximate='none'"
        else:
            return None
        name = ctx.fresh("fn")
        ctx.add_init(f"self.{name} = functools.partial({call})")
        return expr(f"self.{name}({src(site.x)})")
    _custom(ctx, make, "no op with parameters")
    ensure_import(ctx.tree, "functools")


def act_lambda(ctx: Ctx):
    """The op as a lambda held in an attribute: self.f = lambda t: F.leaky_relu(t, 0.2)."""
    def make(site, ctx):
        if not _hoistable(site) or site.kind in ("pool", "norm", "dropout", "binary", "minimum"):
            return None
        inner = Site(site.kind, site.op, ast.Name("t", ast.Load()), site.params, module=None)
        body = _emit(inner, "F", ctx) or _emit(inner, "torch", ctx)
        if body is None:
            return None
        name = ctx.fresh("f")
        ctx.add_init(f"self.{name} = lambda t: {src(body)}")
        return expr(f"self.{name}({src(site.x)})")
    _custom(ctx, make, "no op")


def unbound_methods(ctx: Ctx):
    """Tensor methods called unbound: torch.Tensor.relu(x), torch.Tensor.mul(x, 2.0)."""
    def make(site, ctx):
        x, P = src(site.x), _P(site)
        if site.kind == "unary" and UNARY[site.op][2]:
            return expr(f"torch.Tensor.{UNARY[site.op][2]}({x})")
        if site.kind == "binary" and is_tensor(site.x, ctx):
            return expr(f"torch.Tensor.{site.op}({x}, {P['other']})")
        if site.kind == "reduce":
            return expr(f"torch.Tensor.{site.op}({x}, {P['dim']}" + (f", keepdim={P['keepdim']})" if "keepdim" in P
                                                                      else ")"))
        if site.kind in ("hardtanh", "clamp"):
            lo, hi = P.get("min_val", P.get("min", "-1.0")), P.get("max_val", P.get("max", "1.0"))
            return expr(f"torch.Tensor.clamp({x}, {lo}, {hi})")
        if site.kind == "softmax":
            return expr(f"torch.Tensor.softmax({x}, {P.get('dim', '1')})")
        return None
    _custom(ctx, make, "no op with a method")


OPERATOR = {"add": "add", "sub": "sub", "mul": "mul", "div": "truediv"}


def operator_module(ctx: Ctx):
    """Binary operators as the operator module's functions: operator.mul(x, 2.0)."""
    def make(site, ctx):
        if site.kind != "binary":
            return None
        return expr(f"operator.{OPERATOR[site.op]}({src(site.x)}, {_P(site)['other']})")
    _custom(ctx, make, "no binary op")
    ensure_import(ctx.tree, "operator")


def dunder_methods(ctx: Ctx):
    """Binary operators as x.__mul__(y) or x.mul(other=y) (a tensor's methods)."""
    def make(site, ctx):
        if site.kind != "binary" or not is_tensor(site.x, ctx):
            return None
        x, o = src(site.x), _P(site)["other"]
        if ctx.rng.random() < 0.5:
            return expr(f"({x}).__{OPERATOR[site.op]}__({o})")
        return expr(f"({x}).{site.op}(other={o})")
    _custom(ctx, make, "no binary op on a tensor")


def all_keywords(ctx: Ctx):
    """Functions called with every argument by keyword: F.leaky_relu(input=x, negative_slope=0.2),
    torch.clamp(input=x, min=-1, max=1), torch.sum(input=x, dim=1)."""
    def make(site, ctx):
        x, P, F = src(site.x), _P(site), ctx.F
        if site.kind == "unary":
            fn = UNARY[site.op][0] or F(UNARY[site.op][1])
            return expr(f"{fn}(input={x})")
        if site.kind == "leaky":
            return expr(f"{F('leaky_relu')}(input={x}, negative_slope={P.get('negative_slope', '0.01')})")
        if site.kind in ("hardtanh", "clamp"):
            lo, hi = P.get("min_val", P.get("min", "-1.0")), P.get("max_val", P.get("max", "1.0"))
            return expr(ctx.rng.choice([f"torch.clamp(input={x}, min={lo}, max={hi})",
                                        f"{F('hardtanh')}(input={x}, min_val={lo}, max_val={hi})"]))
        if site.kind == "softmax":
            return expr(f"{F('softmax')}(input={x}, dim={P.get('dim', '1')})")
        if site.kind in ("reduce", "extreme"):
            k = f", keepdim={P['keepdim']}" if "keepdim" in P else ""
            return expr(f"torch.{site.op}(input={x}, dim={P['dim']}{k})" + (".values" if site.kind == "extreme" else ""))
        if site.kind == "binary" and is_tensor(site.x, ctx):
            return expr(f"torch.{site.op}(input={x}, other={P['other']})")
        return None
    _custom(ctx, make, "no function call")


def module_globals(ctx: Ctx):
    """Numbers forward reads (a scale, a slope, a dim) as module-level constants."""
    fwd = ctx.forward
    hoisted = []

    class Sub(ast.NodeTransformer):
        def visit_Subscript(self, node):
            return node   # (x[:, None], [0]: indices stay)

        def visit_Constant(self, node):
            if type(node.value) in (int, float):
                name = f"K_{len(hoisted) + 1}"
                hoisted.append(stmt(f"{name} = {node.value!r}"))
                return ast.Name(name, ast.Load())
            return node

    fwd.body = [Sub().visit(s) for s in fwd.body]
    if not hoisted:
        raise NotApplicable("no number in forward")
    i = max(j for j, n in enumerate(ctx.tree.body) if isinstance(n, (ast.Import, ast.ImportFrom))) + 1
    ctx.tree.body[i:i] = hoisted


def _name_assignments(fwd: ast.FunctionDef) -> list[int]:
    """The indices of forward's statements `name = ...` (NotApplicable where there is none)."""
    spots = [i for i, s in enumerate(fwd.body) if isinstance(s, ast.Assign) and len(s.targets) == 1
             and isinstance(s.targets[0], ast.Name)]
    if not spots:
        raise NotApplicable("no assignment")
    return spots


def noop_casts(ctx: Ctx):
    """A value cast to the dtype (device) it has: x = x.to(x.dtype) / x.type_as(x) / x.to(x.device)."""
    fwd = ctx.forward
    spots = _name_assignments(fwd)
    for i in sorted(ctx.rng.sample(spots, min(2, len(spots))), reverse=True):
        t = fwd.body[i].targets[0].id
        cast = ctx.rng.choice([f"{t}.to({t}.dtype)", f"{t}.type_as({t})", f"{t}.to({t}.device)",
                               f"{t}.to(dtype={t}.dtype)", f"{t}.to(device={t}.device, dtype={t}.dtype)"])
        fwd.body.insert(i + 1, stmt(f"{t} = {cast}"))


def training_branch(ctx: Ctx):
    """`if self.training:` around a dropout (its identity in eval), and a statement written in both
    branches of one."""
    modules = module_classes(ctx)
    fwd = ctx.forward
    n = 0
    for i, s in enumerate(fwd.body):
        if isinstance(s, ast.Assign) and isinstance(s.value, ast.Call) and len(s.targets) == 1 and \
                isinstance(s.targets[0], ast.Name) and self_attr(s.value.func) in modules and \
                nn_class(modules[self_attr(s.value.func)]) == "Dropout" and len(s.value.args) == 1 and \
                isinstance(s.value.args[0], ast.Name) and s.value.args[0].id == s.targets[0].id:
            fwd.body[i] = stmt(f"if self.training:\n    {src(s)}")
            n += 1
    spots = [i for i, s in enumerate(fwd.body) if isinstance(s, ast.Assign)]
    if spots:
        i = ctx.rng.choice(spots)
        s = fwd.body[i]
        fwd.body[i] = stmt(f"if self.training:\n    {src(s)}\nelse:\n    {src(s)}")
        n += 1
    if not n:
        raise NotApplicable("no statement")


def static_helpers(ctx: Ctx):
    """The op in a @staticmethod of the model, called self._op(x) / Model._op(x)."""
    def make(site, ctx):
        if site.kind in ("binary", "minimum", "pool", "norm", "dropout"):
            return None
        names = sorted(site.params)
        args = [f"a_{n}" for n in names]
        inner = Site(site.kind, site.op, ast.Name("t", ast.Load()),
                     {n: ast.Name(a, ast.Load()) for n, a in zip(names, args)}, module=None)
        body = _emit(inner, "F", ctx) or _emit(inner, "torch", ctx)
        if body is None:
            return None
        name = ctx.fresh(f"_{site.op}_static")
        fn = stmt(f"@staticmethod\ndef {name}(t{''.join(', ' + a for a in args)}):\n    return {src(body)}")
        ctx.cls.body.append(fn)
        values = [src(site.params[n]) if isinstance(site.params[n], ast.AST) else repr(site.params[n]) for n in names]
        owner = ctx.rng.choice(["self", ctx.cls.name])
        return expr(f"{owner}.{name}({src(site.x)}{''.join(', ' + v for v in values)})")
    _custom(ctx, make, "no op")


def identity_modules(ctx: Ctx):
    """nn.Identity() placeholders: kept in an attribute and called between two statements."""
    fwd = ctx.forward
    spots = _name_assignments(fwd)
    i = ctx.rng.choice(spots)
    t = fwd.body[i].targets[0].id
    name = ctx.fresh("identity")
    ctx.add_init(f"self.{name} = nn.Identity()")
    fwd.body.insert(i + 1, stmt(f"{t} = self.{name}({t})"))


def sequential_ordered(ctx: Ctx):
    """The Linear and the module calls after it as nn.Sequential(OrderedDict([...])), its layers
    named, and an nn.Identity() among them."""
    taken = _linear_run_taken(ctx, 1)
    if taken is None:
        raise NotApplicable("no module call of the Linear")
    i, j, run, attrs, parts, first = taken
    items = [f"({a!r}, {parts[a]})" for a in attrs]
    items.insert(ctx.rng.randint(0, len(items)), "('identity', nn.Identity())")
    ctx.init.body.insert(first, stmt(f"self.net = nn.Sequential(OrderedDict([{', '.join(items)}]))"))
    for a in attrs:
        ctx.move_key(f"{a}.", f"net.{a}.")
    _run_as_net(ctx, i, j, run)
    ctx.tree.body.insert(0, stmt("from collections import OrderedDict"))


def base_class_forward(ctx: Ctx):
    """The GEMM in a base class's forward, the rest in the subclass's: class Model(_GemmBase):
    def forward(self, x): x = super().forward(x); ... (the base holds __init__)."""
    cls, fwd = ctx.cls, ctx.forward
    body = [s for s in fwd.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    modules = module_classes(ctx)
    for i, s in enumerate(body):
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name) and any(
                isinstance(c, ast.Call) and (
                    (self_attr(c.func) in modules and nn_class(modules[self_attr(c.func)]) in ("Linear", "Sequential"))
                    or (dotted(c.func) or "").endswith(("linear", "addmm", "matmul", "einsum", ".mm")))
                or isinstance(c, ast.BinOp) and isinstance(c.op, ast.MatMult) for c in ast.walk(s.value)):
            rest = body[i + 1:]
            name = s.targets[0].id
            before = {t.id for b in body[:i + 1] for t in ast.walk(b) if isinstance(t, ast.Name)
                      and isinstance(t.ctx, ast.Store)} | {a.arg for a in fwd.args.args[1:]}
            live = {n for r in rest for n in _loads(r)} & before
            if not rest or not isinstance(rest[-1], ast.Return) or live - {name}:
                raise NotApplicable("the rest reads more than the GEMM's value")
            args = ", ".join(a.arg for a in fwd.args.args[1:])
            fwd.body = body[:i + 1] + [stmt(f"return {name}")]
            rename_names(cls, {"Model": "_GemmBase"})
            cls.name = "_GemmBase"
            sub = stmt(f"class Model(_GemmBase):\n    def forward(self, {args}):\n        {name} = super().forward({args})")
            sub.body[0].body.extend(rest)
            ctx.tree.body.insert(ctx.tree.body.index(cls) + 1, sub)
            return
    raise NotApplicable("no GEMM statement")


def act_getattr(ctx: Ctx):
    """The op's function looked up by its name: self.act_name = 'gelu'; getattr(F, self.act_name)(x),
    or an nn.ModuleDict of activations indexed by it."""
    def make(site, ctx):
        if site.kind != "unary":
            return None
        name = ctx.fresh("act_name")
        ctx.add_init(f"self.{name} = {site.op!r}")
        if ctx.rng.random() < 0.5:
            owner = ctx.f_alias if UNARY[site.op][1] or site.op in ("sigmoid", "tanh") else "torch"
            return expr(f"getattr({owner}, self.{name})({src(site.x)})")
        acts = ctx.fresh("acts")
        ctx.add_init(f"self.{acts} = nn.ModuleDict({{{site.op!r}: nn.{UNARY[site.op][4]}(), 'identity': nn.Identity()}})")
        return expr(f"self.{acts}[self.{name}]({src(site.x)})")
    _custom(ctx, make, "no unary op")


def all_positional(ctx: Ctx):
    """Functions called with every argument by position, defaults written out:
    F.leaky_relu(x, 0.01, False), F.hardtanh(x, -1.0, 1.0, False), torch.sum(x, 1, False)."""
    def make(site, ctx):
        x, P, F = src(site.x), _P(site), ctx.F
        if site.kind == "unary" and site.op == "relu":   # (F.gelu's approximate is keyword-only)
            return expr(f"{F('relu')}({x}, False)")
        if site.kind == "leaky":
            return expr(f"{F('leaky_relu')}({x}, {P.get('negative_slope', '0.01')}, False)")
        if site.kind in ("hardtanh", "clamp"):
            lo, hi = P.get("min_val", P.get("min", "-1.0")), P.get("max_val", P.get("max", "1.0"))
            return expr(f"{F('hardtanh')}({x}, {lo}, {hi}, False)")
        if site.kind == "softmax":
            return expr(f"{F('softmax')}({x}, {P.get('dim', '1')}, 3, None)")
        if site.kind == "reduce" and site.op in ("sum", "mean", "logsumexp"):
            return expr(f"torch.{site.op}({x}, {P['dim']}, {P.get('keepdim', 'False')})")
        if site.kind == "extreme":
            return expr(f"torch.{site.op}({x}, {P['dim']}, {P.get('keepdim', 'False')})[0]")
        if site.kind == "dropout":
            m = f"self.{site.module}"
            return expr(f"{F('dropout')}({x}, {m}.p, {m}.training, False)")
        return None
    _custom(ctx, make, "no function")


AXES.update({
    "act attribute": act_attribute,
    "act by name from a dict": act_by_name,
    "functools.partial": act_partial,
    "lambda attribute": act_lambda,
    "unbound Tensor methods": unbound_methods,
    "operator module": operator_module,
    "dunder / keyword methods": dunder_methods,
    "all keywords": all_keywords,
    "module-level numbers": module_globals,
    "no-op casts": noop_casts,
    "training branch": training_branch,
    "static helpers": static_helpers,
    "identity modules": identity_modules,
    "Sequential OrderedDict": sequential_ordered,
    "base class forward": base_class_forward,
    "getattr by name": act_getattr,
    "all positional": all_positional,
})
LATE = LATE + ("base class forward",)

# ---- shrink and compare -------------------------------------------------------------------------

def shrink(text: str, constants: dict) -> str:
    """The file with its module-level constants set to `constants` (name -> value)."""
    tree = parse(text)
    for n in tree.body:
        if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name) and n.targets[0].id in constants:
            n.value = expr(repr(constants[n.targets[0].id]))
    return ast.unparse(tree) + "\n"


def move_state(state: dict, keys: dict) -> dict:
    """The original's state_dict with its keys moved as the respelling moved them."""
    out = {}
    for k, v in state.items():
        if k == "__new__":
            continue
        new, transpose = k, False
        if k in keys:
            target = keys[k]
            if isinstance(target, tuple):
                new, transpose = target[0], True
            else:
                new = target
        else:
            for old, prefix in keys.items():
                if old.endswith(".") and k.startswith(old):
                    new = prefix + k[len(old):]
        out[new] = v.t() if transpose else v
    return out


def load_moved(model: nn.Module, state: dict, keys: dict):
    moved = move_state(state, keys)
    own = model.state_dict()
    missing = set(own) - set(moved) - set(keys.get("__new__", ()))
    extra = set(moved) - set(own)
    moved = {**{k: v for k, v in own.items() if k not in moved}, **moved}
    if missing or extra:
        raise AssertionError(f"state keys do not line up: missing {sorted(missing)}, extra {sorted(extra)}")
    model.load_state_dict(moved)
