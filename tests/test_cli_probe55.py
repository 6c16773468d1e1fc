"""Session 55's probe of the CLI as a careless user meets it (docs/experiments/s55/cli_probe.py):
what it found, kept fixed. CPU only."""

import ast
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from kgen.cli import main

GOOD = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.fc(x) * 2.0)

batch_size = 16
in_features = 64
out_features = 32

def get_inputs():
    return [torch.randn(batch_size, in_features)]

def get_init_inputs():
    return [in_features, out_features]
'''


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def reference(tmp_path, name="ref.py", text=GOOD) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("where, text, said", [
    ("at import", GOOD + "\nimport sys\nsys.exit(0)\n", "sys.exit(0)"),
    ("at import, a status", GOOD + "\nimport sys\nsys.exit(3)\n", "sys.exit(3)"),
    ("in get_inputs", GOOD.replace("    return [torch.randn", "    import sys; sys.exit()\n    return [torch.randn"),
     "get_inputs() / get_init_inputs() raised SystemExit: sys.exit()"),
    ("in __init__", GOOD.replace("super().__init__()", "super().__init__(); import sys; sys.exit(5)"),
     "Model(*get_init_inputs()) raised SystemExit: sys.exit(5)"),
    ("in forward", GOOD.replace("return torch.relu", "import sys; sys.exit(4); return torch.relu"),
     "SystemExit: sys.exit(4)"),
])
def test_a_reference_that_exits_is_refused_not_kgens_own_exit(tmp_path, where, text, said):
    """sys.exit() in the reference ended kgen with the file's status and no word (sys.exit(0): a
    'success' that wrote nothing)."""
    out = tmp_path / "out.py"
    r = run("generate", reference(tmp_path, text=text), "-o", out)
    assert r.exit_code == 2, (where, r.exit_code, r.output)
    assert said in r.output and "ref.py" in r.output, r.output
    assert not out.exists()


def test_a_syntax_error_names_the_file_not_unknown(tmp_path):
    r = run("generate", reference(tmp_path, text=GOOD + "\ndef broken(:\n"), "-o", tmp_path / "out.py")
    assert r.exit_code == 2, r.output
    assert "<unknown>" not in r.output and "(ref.py, line 22)" in r.output, r.output


def test_a_reference_whose_name_does_not_end_in_py_is_read_as_the_file_it_is(tmp_path):
    """REF without `.py` and without a slash (`model.txt`) was taken for a shipped problem's name,
    and its refusal crashed (UnboundLocalError) before it could be said."""
    ref = reference(tmp_path, "model.txt")
    out = tmp_path / "out.py"
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        r = run("generate", "model.txt", "-o", out)
    finally:
        os.chdir(cwd)
    assert r.exit_code == 0, r.output
    assert "Traceback" not in r.output and r.exception is None or isinstance(r.exception, SystemExit)
    text = out.read_text()
    ast.parse(text)
    assert str(ref.resolve()) in text
