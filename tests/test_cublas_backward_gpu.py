"""GPU tier of a cuBLAS variant's backward (issue 24, item 3): the same backward kernels as kgen's
own GEMMs use, with dx = dz W and dW = dz^T x on cuBLAS in the variant's compute type (fp32,
TF32, BF16), judged as `kgen validate` judges gradients, against fp64 at the tier's tolerance
with eager in the same math beside them (cuBLAS fp32 is eager's own GEMM: the fp32-exact gate),
on a point-wise part with a kink (LeakyReLU), a staged part with BatchNorm and softmax, and a
broadcast tail after GroupNorm; and 20 training steps at TF32."""

import pytest
import torch

from kgen.codegen import generator
from kgen.check.loading import EmittedFile
from kgen.check.validate import check_gradients, check_training
from kgen.tune.search import Candidate
from kgen.tune.spec import Spec

from conftest import REFS_DIR, build_once

pytestmark = pytest.mark.gpu

MATHS = {"fp32_simt": 1e-4, "tf32": 1e-2, "bf16": 5e-2}
REFS = ["gemm_mul_leakyrelu", "gemm_bn_scale_softmax", "gemm_groupnorm_min_bias"]
SHAPE = (257, 300, 1024)   # (GroupNorm(512) needs the features in whole groups)


def spec_for(ref: str, math: str) -> Spec:
    problem = ref if ref == "gemm_bn_scale_softmax" else str(REFS_DIR / f"{ref}.py")
    return Spec.of(problem, *SHAPE, math=math, backend="cublas", fusion=1)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    if not torch.cuda.is_available():
        return {}
    d = tmp_path_factory.mktemp("cublas_backward")
    candidates = [Candidate(s, generator.write(s, d / f"{s.name()}.py"))
                  for s in (spec_for(r, m) for r in REFS for m in MATHS)]
    build_once(tmp_path_factory, "test_cublas_backward_gpu", candidates, 9, 600, lambda line: None)
    return {c.spec.name(): EmittedFile(c.path) for c in candidates}


@pytest.mark.parametrize("math", list(MATHS))
@pytest.mark.parametrize("ref", REFS)
def test_gradients_against_fp64(files, ref, math):
    f = files[spec_for(ref, math).name()]
    assert "backward:  kgen kernels" in f.path.read_text()
    r = check_gradients(f, torch.device("cuda"), MATHS[math], SHAPE[0], training=True)
    assert r.passed, r.line()


@pytest.mark.parametrize("ref", REFS)
def test_training_steps_at_tf32(files, ref):
    f = files[spec_for(ref, "tf32").name()]
    r = check_training(f, torch.device("cuda"), MATHS["tf32"], SHAPE[0])
    assert r.passed and not r.detail.startswith("not "), r.line()
