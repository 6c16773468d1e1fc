"""GPU tier: faults planted by hand into a rendered file's source before it is built must be
caught by `kgen validate` at tol 1e-4, each with a one-line reason (issue 12).

- softmax logits scaled by 1.001: allclose at 1e-4 passes it (softmax outputs are ~1.2e-4), the
  fp32-exact gate must not;
- logits scaled by 1.01;
- num_batches_tracked not incremented;
- an out-of-bounds write in the finalize kernel: the first check reports the CUDA error once
  and every later one is "not run: CUDA context lost" (in a subprocess: the context is gone);
- in the backward kernels only (the forward untouched): softmax's reverse pass scaled by 1.001,
  and BatchNorm's weight gradient scaled by 1.001: the gradient check must catch both.
"""

import subprocess
import sys

import pytest
import torch

from kgen.codegen import generator
from kgen.check.loading import EmittedFile
from kgen.tune.spec import Spec, Tile
from kgen.tune.search import Candidate, build_all
from kgen.check.validate import NOT_RUN, check_gradients, validate

pytestmark = pytest.mark.gpu

HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
# BatchNorm applied to the row of S in the training-mode row kernel (three passes: max, sum,
# output): every use of the softmax logits goes through it.
SOFTMAX_LOGIT = "fmaf(p.col_a[n], s, p.col_c[n])"


def softmax_spec() -> Spec:
    """Problem 84 at KernelBench's shape, as its shipped 1e-4 winner computes it (3xTF32)."""
    if HOPPER:
        return Spec("gemm_bn_scale_softmax", 1024, 8192, 8192, math="tf32x3", backend="wgmma",
                    fusion=2, tile=Tile(128, 128, 32, 16, 128, stages=4))
    return Spec("gemm_bn_scale_softmax", 1024, 8192, 8192, math="tf32x3", backend="kgen",
                fusion=2, tile=Tile(128, 128, 32, 64, 32, stages=3))


def plant(tmp_path, name: str, old: str, new: str, count: int) -> EmittedFile:
    source = generator.render(softmax_spec())
    assert source.count(old) == count, f"the fault site {old!r} is not in the rendered file"
    path = tmp_path / f"{name}.py"
    path.write_text(source.replace(old, new))
    return EmittedFile(path)


def assert_caught(results):
    failed = [r for r in results if not r.passed]
    assert failed, "the planted fault passed every check"
    for r in failed:
        assert r.detail and "\n" not in r.detail, f"{r.name}: the reason is not one line: {r.detail!r}"
    return failed


@pytest.mark.parametrize("factor", ["1.001f", "1.01f"])
def test_scaled_logits_are_rejected(tmp_path, factor):
    # 8 sites: the forward row kernel's cached path computes the logit once per element (its
    # copy in shared memory holds it), the uncached path in each of its 3 passes; the backward
    # row kernel in its 2 forward passes (max, sum) and its 2 reverse passes. (The quick
    # validation runs no backward: the forward's sites are the ones that must be caught.)
    f = plant(tmp_path, f"logits_{factor}", SOFTMAX_LOGIT, f"({factor} * {SOFTMAX_LOGIT})", 8)
    failed = assert_caught(validate(f, tol=1e-4, quick=True))
    if factor == "1.001f":
        # allclose alone passes this one on the output checks: the fp32-exact gate catches it.
        assert any("fp32-exact gate" in r.detail for r in failed), [r.detail for r in failed]


def test_missing_num_batches_tracked_update_is_rejected(tmp_path):
    f = plant(tmp_path, "no_nbt", "bn.num_batches_tracked.add_(1)", "bn.num_batches_tracked.add_(0)", 1)
    failed = assert_caught(validate(f, tol=1e-4, quick=True))
    assert any("num_batches_tracked" in r.detail for r in failed)


def test_out_of_bounds_write_stops_at_the_first_check(tmp_path):
    f = plant(tmp_path, "oob", "f.col_c[n] = be - a * centre;", "f.col_c[n + (1 << 30)] = be - a * centre;", 1)
    proc = subprocess.run([sys.executable, "-m", "kgen.cli", "validate", str(f.path), "--tol", "1e-4"],
                          capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    lines = out.strip().splitlines()
    crashed = [line for line in lines if line.startswith("FAIL")]
    assert len(crashed) == 1, out          # reported once, by the check that hit it
    assert "illegal" in crashed[0].lower() or "cuda" in crashed[0].lower(), out
    assert "Traceback" not in out, out
    assert NOT_RUN in lines[-1], out        # the rest, in one line
    assert sum(NOT_RUN in line for line in lines) == 1, out


# Sites in the backward kernels only: the reverse pass of softmax (in the row kernel's two
# reverse passes), and BatchNorm's weight gradient (its per-element contribution to dγ).
BACKWARD_FAULTS = {
    "softmax_reverse": ("d9 += ((d11) / (r10));", "d9 += ((1.001f * d11) / (r10));", 2, "dL/d(input)"),
    "bn_weight": ("c[1] = g * xhat;", "c[1] = 1.001f * g * xhat;", 1, "dL/d(bn.weight)"),
}


def test_faults_in_the_backward_kernels_are_rejected(tmp_path):
    files = {name: plant(tmp_path, name, old, new, count) for name, (old, new, count, _) in BACKWARD_FAULTS.items()}
    build_all([Candidate(f.spec, f.path) for f in files.values()], 16, 600, lambda line: None)
    for name, f in files.items():
        # the forward is untouched: its output checks pass
        assert all(r.passed for r in validate(f, tol=1e-4, quick=True)), name
        r = check_gradients(f, torch.device("cuda"), 1e-4, f.spec.batch, training=True)
        assert not r.passed, f"{name}: the planted fault passed the gradient check"
        assert BACKWARD_FAULTS[name][3] in r.detail and "\n" not in r.detail, (name, r.detail)
