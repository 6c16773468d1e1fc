"""What a newcomer reads first: the README's commands and snippets, the license, the changelog."""

import ast
import builtins
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from kgen.cli import main

REPO = Path(__file__).parent.parent
README = (REPO / "README.md").read_text()


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def undefined_names(source: str) -> set[str]:
    """Names a snippet reads that it never binds (imports, assignments, defs, arguments)."""
    tree = ast.parse(source)
    bound, read = set(dir(builtins)), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (bound if isinstance(node.ctx, ast.Store) else read).add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return read - bound


def test_the_readme_snippets_define_what_they_use():
    blocks = python_blocks(README)
    assert blocks
    for block in blocks:
        assert undefined_names(block) == set(), block
    assert undefined_names("y = model(x)\n") == {"model", "x"}   # the check sees what is missing


def test_the_readme_snippet_names_files_that_ship():
    for block in python_blocks(README):
        for path in re.findall(r'load\("([^"]+)"\)', block):
            assert (REPO / path).is_file(), path


def test_every_command_is_in_the_readme_and_its_help_says_what_each_option_does():
    for name, command in main.commands.items():
        assert f"kgen {name}" in README, name
        for param in command.params:
            if param.param_type_name == "option":
                assert param.help, f"kgen {name} {param.opts[0]} has no help"


def test_shell_completion_works_as_the_readme_says(monkeypatch):
    assert '_KGEN_COMPLETE=bash_source kgen' in README
    r = CliRunner().invoke(main, [], prog_name="kgen",
                           env={"_KGEN_COMPLETE": "bash_complete", "COMP_WORDS": "kgen win", "COMP_CWORD": "1"})
    assert r.exit_code == 0 and r.output.splitlines() == ["plain,winners"], r.output


def test_license_and_changelog():
    license_text = (REPO / "LICENSE").read_text()
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    changelog = (REPO / "CHANGELOG.md").read_text()
    for command in main.commands:   # each command, from the first four to the newest, is in it
        assert f"kgen {command}" in changelog or f"`{command}`" in changelog, command


@pytest.mark.gpu
def test_the_readme_snippet_runs(monkeypatch):
    """The "Using an emitted file" snippet, as a user runs it from the repository's root."""
    monkeypatch.chdir(REPO)
    (block,) = [b for b in python_blocks(README) if "ModelNew" in b]
    exec(compile(block, "README.md", "exec"), {})
