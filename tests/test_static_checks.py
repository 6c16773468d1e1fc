import pytest

from kgen.check.static_checks import violations

OK = "import torch\nimport math\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"


def test_clean_file_passes():
    assert violations(OK) == []


@pytest.mark.parametrize("snippet, phrase", [
    ("try:\n    x = 1\nexcept Exception:\n    x = 2\n", "try/except"),
    ("def f():\n    pass\n", "pass is not allowed"),
    ("from . import helper\n", "relative import"),
    ("import numpy\n", "only torch and the standard library"),
    ("from triton import jit\n", "only torch and the standard library"),
    ("p = __file__\n", "__file__"),
    ("data = open('weights.bin').read()\n", "open"),
    ("setattr(torch, 'mm', None)\n", "monkey-patching"),
    ("torch.zeros(3)\n", "runs a call at import"),
])
def test_each_rule_is_enforced(snippet, phrase):
    found = violations(OK + snippet)
    assert any(phrase in v for v in found), found


def test_missing_model_new_and_syntax_errors():
    assert any("ModelNew" in v for v in violations("import torch\n"))
    assert any("does not parse" in v for v in violations("def (:\n"))


# ---- KernelBench's checker, restated ----------------------------------------------------------
from kgen.check.static_checks import check_emitted, kernelbench_violations, kernelbench_warnings  # noqa: E402

KERNEL = ('src = r"""\n__global__ void k(float* x) { x[threadIdx.x] = 0.f; }\n"""\n'
          "from torch.utils.cpp_extension import load_inline\n")


def test_a_kernel_file_passes_kernelbench():
    assert kernelbench_violations(OK + KERNEL) == []
    assert check_emitted(OK + KERNEL) == []


@pytest.mark.parametrize("snippet, rule", [
    ('"""A separate statistics pass."""\n', "inheritance bypass"),   # a docstring
    ('msg = "bypass the pass"\n', "inheritance bypass"),              # a Python string
    ("/* one pass over the row */\n", "inheritance bypass"),         # a CUDA block comment
    ('x = "try: this"\n', "try/except"),
    ('x = "except ValueError"\n', "try/except"),
    ("torch.cuda.synchronize = lambda: None\n", "timing function"),
    ("import threading\n", "threads"),
    ("from concurrent.futures import ThreadPoolExecutor\n", "threads"),
    ("class Lazy(torch.Tensor):\n    x = 1\n", "tensor subclass"),
])
def test_kernelbench_reads_text_not_the_ast(snippet, rule):
    """What the AST rules let through and KernelBench's text rules do not."""
    found = kernelbench_violations(OK + KERNEL + snippet)
    assert any(rule in v for v in found), found


@pytest.mark.parametrize("snippet", [
    "x = 1  # one pass over the row\n",
    "// a pass in a CUDA line comment\n",
    'url = "http://example.com/pass"\n',       # cut at '//': what follows is never searched
    "passed, bypass, passes, compass = 1, 2, 3, 4\n",
])
def test_what_kernelbench_cuts_or_does_not_match(snippet):
    assert kernelbench_violations(OK + KERNEL + snippet) == []


@pytest.mark.parametrize("drop, phrase", [("__global__", "__global__"), ("load_inline", "load_inline"),
                                          ("threadIdx.x", "thread indexing")])
def test_kernelbench_needs_a_cuda_kernel_and_an_inline_build(drop, phrase):
    text = (OK + KERNEL).replace("cpp_extension", "x").replace(drop, "zero")
    assert any(phrase in v for v in kernelbench_violations(text))


def test_warning_level_rules_are_reported_not_enforced():
    text = OK + KERNEL + "y = torch.matmul(a, b)\ns = torch.cuda.Stream()\n"
    assert kernelbench_violations(text) == []
    warnings = kernelbench_warnings(text)
    assert any("torch computation op" in w for w in warnings)
    assert any("extra CUDA streams" in w for w in warnings)


def test_kgen_refuses_to_write_a_file_that_breaks_a_rule(tmp_path, monkeypatch):
    from kgen.codegen import generator
    from kgen.tune.spec import Spec, Tile

    spec = Spec.of("gemm_scale_bn", 64, 64, 64, math="tf32x3", backend="wgmma",
                   tile=Tile(128, 128, 32, 16, 128, stages=4))
    real = generator.render
    monkeypatch.setattr(generator, "render", lambda s, m=None: real(s, m).replace("Drop-in", "A pass-through"))
    with pytest.raises(generator.StaticCheckError, match="inheritance bypass"):
        generator.write(spec, tmp_path / "x.py")
    assert list(tmp_path.iterdir()) == []


def test_the_fast_search_finds_what_re_search_finds():
    """static_checks._search drops a leading \\b before a word character and checks the boundary
    at each hit: the same match as re.search, for every pattern of every rule set, at hits that
    sit at the text's start, after a word character (ASCII, '_', a digit, a non-ASCII letter),
    after a non-word one, and repeated where the first hits fail the boundary."""
    import itertools
    import re

    from kgen.check import static_checks as sc

    patterns = [p for rules in (sc.KERNELBENCH_STRICT, sc.KERNELBENCH_WARNINGS) for _, ps, _ in rules for p in ps]
    patterns += list(sc.CUDA_FEATURE_PATTERNS)
    assert sum(p.startswith(r"\b") for p in patterns) >= 8   # the fast path is exercised
    words = ["try:", "try :", "except:", "except ValueError", "pass", "threadIdx.x", "blockIdx.y",
             "torch.relu(x)", "torch.mm (a)", "nn.functional.relu", "F.linear(x)", "__shared__ float"]
    befores = ["", "x", "_", "9", "é", " ", ".", "\n", "(", "x_9é"]
    texts = [b + w + a for w, b, a in itertools.product(words, befores, ["", "d", " ", "\n"])]
    texts += ["".join(b + w for b in befores) for w in words]   # failing hits before a good one
    texts += [(OK + KERNEL).replace("threadIdx", "xthreadIdx"), OK + KERNEL]
    for p, t in itertools.product(patterns, texts):
        want, got = re.search(p, t), sc._search(p, t)
        assert (want and (want.span(), want.group(0))) == (got and (got.span(), got.group(0))), (p, t)
