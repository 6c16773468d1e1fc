import pytest

from kgen.static_checks import violations

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
