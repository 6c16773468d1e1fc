"""GPU tier of heads that read one token of a (batch, tokens, features) input before the Linear
(tests/test_spellings_probe62_tokens.py has the CPU side): the emitted file of a BertPooler, a
RobertaClassificationHead (3 labels: a last GEMM 3 wide), a decoder's last-token head and one built
in bf16, against the module itself: kgen's full gate (forward, gradients in train and eval mode, a
training run; the checks give both models the input around the token's rows, Reference.tokens_around)
in fp32 (1e-4) and bf16 (1e-2), at ragged sizes (257 samples of 5 tokens, 296 features); and
ModelNew on the module's own (batch, tokens, features) input, output and x's gradient (zeros at the
tokens not read) against fp64."""

import pytest
import torch

from kgen.check.validate import validate
from kgen.frontend.reference import Reference

from conftest import gate_failures, tf32x3_wgmma_files
from test_rows_input_gpu import assert_near_fp64_on
from test_spellings_probe62_tokens import head_source

pytestmark = pytest.mark.gpu

HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
SHAPE = (257, 5, 296)
# name -> head_source's (index, head, forward's name, contiguous, dtype)
CASES = {
    "bert_pooler": ("x[:, 0]", "pooler", "hidden_states", False, None),
    "roberta_head": ("x[:, 0, :]", "classification head", "features", False, None),
    "last_token": ("x[:, -1]", "last-token head", "hidden_states", True, None),
    "select_gelu": ("x.select(1, 0)", "CLS head, gelu", "x", False, None),
    "pooler_bf16": ("torch.select(x, 1, 0)", "pooler", "sequence_output", True, "bfloat16"),
}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("token_refs")
    modules = {}
    for name, (index, head, arg, contiguous, dtype) in CASES.items():
        path = d / f"{name}.py"
        path.write_text(head_source(index, head, arg, contiguous, dtype, shape=SHAPE))
        ref = Reference(str(path))
        out = 3 if head in ("classification head", "last-token head", "CLS head, gelu") else SHAPE[2]
        modules[name] = (path, int(ref.input.shape[0]), SHAPE[2], out)
    return tf32x3_wgmma_files(tmp_path_factory, "tokens", modules)


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-4), (torch.bfloat16, 1e-2)], ids=["fp32", "bf16"])
@pytest.mark.parametrize("name", CASES)
def test_the_gate(files, name, dtype, tol):
    if not HOPPER:
        pytest.skip("the wgmma files need a Hopper (sm_90) GPU")
    if CASES[name][4] == "bfloat16" and dtype == torch.float32:
        pytest.skip("a module built in bf16 runs in bf16")
    failed = gate_failures(validate(files[name], tol=tol, dtype=dtype), dtype)
    assert not failed, failed


@pytest.mark.parametrize("name", [n for n, case in CASES.items() if case[4] is None])
def test_on_the_modules_own_input(files, name):
    """ModelNew on the (batch, tokens, features) input itself, as KernelBench calls it: the
    module's shape, output and dx (the token's, zeros at the others) as near fp64 as eager's."""
    if not HOPPER:
        pytest.skip("the wgmma files need a Hopper (sm_90) GPU")
    f = files[name]
    assert f.reference.token_of == SHAPE
    assert_near_fp64_on(f, f.reference.token_of)
