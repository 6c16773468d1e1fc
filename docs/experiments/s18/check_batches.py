"""Session 18: emitted files of one module against fp64 and eager fp32 at several batches (the
split-K path at small M included), and the files' outputs against each other.

    PYTHONPATH=. python3 docs/experiments/s18/check_batches.py REF.py FILE.py [FILE.py ...]
"""
import sys

import torch

sys.path.insert(0, "scripts")
from compare_forward import load  # noqa: E402

ref_path, *files = sys.argv[1:]
torch.backends.cuda.matmul.allow_tf32 = False
ref = load(ref_path)
init = ref["get_init_inputs"]()
torch.manual_seed(0)
with torch.device("cuda"):
    model = ref["Model"](*init)
    news = [load(f)["ModelNew"](*init) for f in files]
model64 = ref["Model"](*init).double().cuda()
model64.load_state_dict(model.state_dict())
for new in news:
    new.load_state_dict(model.state_dict())
shape = ref["get_inputs"]()[0].shape
for batch in (128, 200, 1024, 2051):
    torch.manual_seed(batch)
    x = torch.rand(batch, *shape[1:], device="cuda") * 2 - 1
    for m in (model, model64, *news):
        m.eval()   # eval: the running buffers do not move between the calls compared
    with torch.no_grad():
        exact = model64(x.double())
        eager = (model(x).double() - exact).abs().max().item()
        outs = [new(x) for new in news]
    errs = " ".join(f"{(o.double() - exact).abs().max().item():.2e}" for o in outs)
    same = " ".join(f"{(o - outs[0]).abs().max().item():.1e}" for o in outs[1:])
    finite = all(bool(torch.isfinite(o).all()) for o in outs)
    print(f"batch {batch}: eager {eager:.2e} | files {errs} | vs first {same} | finite {finite}")
