"""Static rules every emitted file obeys, checked on its text alone, in two sets:

- kgen's own rules, on the AST: no try/except or pass, imports of torch and the standard
  library only, nothing that depends on `__file__` or files beside it (KernelBench loads files
  with exec), no monkey-patching, extra threads or streams, nothing run at import.
- KernelBench's static checker (`kernel_static_checker.py`, `validate_kernel_static(code,
  backend="cuda", precision="fp32")`), restated: its strict rules make a harness score the file
  zero, so kgen refuses to write a file that breaks one. That checker reads text, not the AST:
  on each line it cuts everything from the first `#`, then from the first `//`, and then
  searches the remaining text of the whole file. So the word "pass" in a docstring, a Python
  string or a CUDA `/* */` comment fails a file as surely as a pass statement.
  Its warning-level rules are reported, not enforced.
"""

from __future__ import annotations

import ast
import functools
import re
import sys

from kgen.pysource import parsed

ALLOWED_TOP_MODULES = {"torch"} | set(sys.stdlib_module_names)
FORBIDDEN_NAMES = {"__file__": "__file__ does not exist when the file is exec'd",
                   "open": "the file must not read files beside it",
                   "setattr": "no monkey-patching",
                   "threading": "no extra threads", "Stream": "no extra streams"}


class StaticCheckError(ValueError):
    """A rendered file that breaks a static rule; kgen does not write it."""


# ---- KernelBench's rules ---------------------------------------------------------------------
# (rule name, patterns, message). Strict rules: any match fails the file.
KERNELBENCH_STRICT = (
    ("code_bypass", (r"\btry\s*:", r"\bexcept\s*:", r"\bexcept\s+\w+"),
     "contains a try/except block (KernelBench: potential fallback bypass)"),
    ("code_bypass", (r"\bpass\b",),
     "contains the word 'pass' outside a # or // comment (KernelBench: inheritance bypass)"),
    ("timing_event_patch",
     (r"torch\.cuda\.Event\.record\s*=", r"torch\.cuda\.Event\.elapsed_time\s*=",
      r"torch\.cuda\.synchronize\s*=", r"torch\.cuda\.Event\s*=", r"time\.perf_counter\s*=",
      r"time\.time\s*="),
     "reassigns a timing function (KernelBench: monkey patch)"),
    ("thread_injection",
     (r"threading\.Thread\s*\(", r"import\s+threading", r"from\s+threading\s+import",
      r"multiprocessing\.(Process|Pool|Manager|Queue|Pipe)", r"import\s+multiprocessing",
      r"concurrent\.futures", r"ThreadPoolExecutor", r"ProcessPoolExecutor"),
     "uses threads, processes or concurrent futures (KernelBench: timing manipulation)"),
    ("lazy_eval",
     (r"_make_subclass", r"class\s+\w+.*\(torch\.Tensor\)", r"class\s+\w+.*\(Tensor\)",
      r"torch\.Tensor\.__new__"),
     "makes a tensor subclass or lazy tensor (KernelBench: lazy evaluation)"),
)
# The cuda backend's implementation rule (strict): a kernel, an inline build, and CUDA code.
CUDA_COMPILE_WORDS = ("load_inline", "cpp_extension")
CUDA_FEATURE_PATTERNS = (r"\bthreadIdx\.", r"\bblockIdx\.", r"\bblockDim\.", r"\bgridDim\.",
                         r"__syncthreads\s*\(", r"__shared__\s+", r"__device__\s+",
                         r"atomicAdd\s*\(", r"atomicMax\s*\(", r"atomicMin\s*\(")
# Warning-level rules: reported by `kernelbench_warnings`, never a reason to refuse a file.
KERNELBENCH_WARNINGS = (
    ("pytorch_wrap", (r"torch\.nn\.(?!(Module|parameter|Parameter|ParameterList|ParameterDict|"
                      r"ModuleList|ModuleDict|init)\b)",),
     "uses a torch.nn compute layer"),
    ("torch_computation_ops",
     (r"\btorch\.(mm|bmm|matmul|einsum|linear|softmax|log_softmax|batch_norm|layer_norm|"
      r"group_norm|logsumexp|clamp|relu|gelu|sigmoid|tanh)(?=\s*\(|\s|$)",
      r"torch\.nn\.functional\.\w+", r"\bnn\.functional\.\w+",
      r"\bF\.(conv|linear|relu|gelu|softmax|batch_norm|layer_norm|dropout|max_pool|avg_pool)"),
     "uses a torch computation op"),
    ("stream_injection",
     (r"torch\.cuda\.Stream\s*\(", r"cuda\.Stream\s*\(", r"with\s+torch\.cuda\.stream",
      r"\.wait_stream\s*\(", r"\.record_stream\s*\("),
     "uses extra CUDA streams"),
    ("precision_downgrade",
     (r"__float2half(_rn)?\s*\(", r"\(\s*__half\s*\)\s*[\w\->\.]+",
      r"static_cast\s*<\s*(__half|half)\s*>\s*\(", r"\.half\s*\(", r"\.float16\s*\(",
      r"\.to\s*\(\s*torch\.(float16|half)\b", r"\.to\s*\(\s*dtype\s*=\s*torch\.(float16|half)\b"),
     "converts fp32 to fp16"),
)


def kernelbench_text(source: str) -> str:
    """The text KernelBench's checker searches: each line cut at its first '#', then at its
    first '//'."""
    lines = []
    for line in source.split("\n"):
        if "#" in line:
            line = line[:line.index("#")]
        if "//" in line:
            line = line[:line.index("//")]
        lines.append(line)
    return "\n".join(lines)


def _line_of(text: str, match: re.Match) -> int:
    return text.count("\n", 0, match.start()) + 1


_WORD = re.compile(r"\w")


@functools.lru_cache(maxsize=None)
def _split_boundary(pattern: str) -> tuple[re.Pattern, bool]:
    """(the pattern without a leading \\b, whether it had one) where the rest opens with a word
    character: _search then finds the same leftmost match by the regex engine's literal scan,
    where a leading \\b made it test every position of the file (5 ms a pattern on a 200 KB
    emitted file, most of a `kgen generate`'s static check)."""
    if pattern.startswith(r"\b") and _WORD.match(pattern[2:3]):
        return re.compile(pattern[2:]), True
    return re.compile(pattern), False


def _search(pattern: str, text: str) -> re.Match | None:
    """re.search(pattern, text). With a leading \\b before a word character, a hit of the rest
    at i is the pattern's hit exactly where \\b holds at i, i.e. where i == 0 or text[i - 1] is
    not a word character (text[i] is one); the first such hit is re.search's."""
    regex, boundary = _split_boundary(pattern)
    pos = 0
    while (m := regex.search(text, pos)) is not None:
        if not boundary or m.start() == 0 or not _WORD.match(text, m.start() - 1):
            return m
        pos = m.start() + 1
    return None


def _rule_hits(text: str, rules) -> list[str]:
    """Per (rule, patterns, message) of `rules` whose patterns match `text` (already
    kernelbench_text), the first pattern's hit, with its line."""
    found = []
    for rule, patterns, message in rules:
        for pattern in patterns:
            m = _search(pattern, text)
            if m:
                found.append(f"line {_line_of(text, m)}: {message} [{rule}: {m.group(0)!r}]")
                break
    return found


def kernelbench_strict_matches(text: str) -> list[str]:
    """What KernelBench's strict rules find in a piece of text (as its checker reads it)."""
    return _rule_hits(kernelbench_text(text), KERNELBENCH_STRICT)


def kernelbench_violations(source: str) -> list[str]:
    """Every strict rule of KernelBench's checker (cuda backend, fp32) that the file breaks."""
    text = kernelbench_text(source)
    problems = _rule_hits(text, KERNELBENCH_STRICT)
    if "__global__" not in text:
        problems.append("no __global__ kernel definition (KernelBench cuda_impl)")
    if not any(word in text for word in CUDA_COMPILE_WORDS):
        problems.append("no load_inline or cpp_extension (KernelBench cuda_impl)")
    if not any(_search(p, text) for p in CUDA_FEATURE_PATTERNS):
        problems.append("no CUDA thread indexing or kernel features (KernelBench cuda_impl)")
    return problems


def kernelbench_warnings(source: str) -> list[str]:
    return _rule_hits(kernelbench_text(source), KERNELBENCH_WARNINGS)


# ---- kgen's rules ----------------------------------------------------------------------------
def violations(source: str) -> list[str]:
    """Every broken rule of kgen's own (AST) set, with its line; empty means the file passes."""
    try:
        tree = parsed(source)
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


def check_emitted(source: str) -> list[str]:
    """Both sets: what must hold of every file kgen writes (empty when it does)."""
    return violations(source) + kernelbench_violations(source)
