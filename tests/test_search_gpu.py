"""A whole `kgen search` on the GPU, as a user runs it: candidates built, measured by the GPU
worker, the runoff and the full validation by that worker's requests (kgen.tune.worker.command),
the winner written and recorded. The CPU tests of the same path use fake workers
(tests/test_search_gpus.py); this is the one that runs the real worker's requests."""

import json
import os
import subprocess
import sys

import pytest


@pytest.mark.gpu
def test_a_small_search_end_to_end(tmp_path):
    env = dict(os.environ, KGEN_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run(
        [sys.executable, "-m", "kgen.cli", "search", "--problem", "gemm_scale_bn", "--batch", "256", "--in", "512",
         "--out", "512", "--math", "tf32x3", "--math", "fp16x3", "--top", "2", "--out-dir", str(tmp_path / "gen"),
         "--results-dir", str(tmp_path / "results")],
        capture_output=True, text=True, timeout=900, env=env, cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "Traceback" not in out and "failed full validation" not in out, out[-4000:]
    assert "fastest valid is" in out, out[-4000:]
    (record_path,) = (tmp_path / "results").glob("search_*.json")
    record = json.loads(record_path.read_text())
    winner = record["winners"]["0.0001"]
    assert winner["full_validation_gpu"] == 0
    assert (tmp_path / "gen" / winner["path"].split("/")[-1]).exists()
    # a rerun takes every measurement and the validation from the cache: no worker request
    again = subprocess.run(proc.args, capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert again.returncode == 0, (again.stdout + again.stderr)[-4000:]
    assert "passed the full validation before on this device" in again.stdout
