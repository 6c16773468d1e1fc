"""Session 39, call A: the pooled weight's means (rewrite.pool_as_weight) written so that their
backward costs one pass over W. Writes, from an emitted file of KernelBench 98, variant files whose
`_kgen_weight0` returns the same means through another autograd formula (experiment only: the
committed file's text edited in place):

  fn     a torch.autograd.Function: forward unflatten(0, (-1, k)).mean(1); backward (g / k)
         expanded over each window and made contiguous (one copy kernel writes dW)
  fnsum  the same, the forward a sum in fp32 scaled by 1/k once (no mean's division pass)

    python3 docs/experiments/s39/means_variants.py FILE.py OUTDIR
"""
import re
import sys

FUNCTION = '''

class _KgenWindowMeans(torch.autograd.Function):
    """Row means of w over windows of k rows; the backward writes dW in one pass."""

    @staticmethod
    def forward(ctx, w, k):
        ctx.shape, ctx.k = w.shape, k
        return FORWARD

    @staticmethod
    def backward(ctx, g):
        rows, cols = ctx.shape
        return (g / ctx.k).unsqueeze(1).expand(-1, ctx.k, -1).reshape(rows, cols), None

'''
FORWARDS = {
    "fn": "w.unflatten(0, (-1, k)).mean(1)",
    "fnsum": "w.unflatten(0, (-1, k)).sum(1, dtype=torch.float32).mul_(1.0 / k).to(w.dtype)",
}


def main(path, outdir):
    text = open(path).read()
    old = "        return (_kgen_w if _kgen_w.shape[0] % 16 == 0 else _kgen_w[:_kgen_w.shape[0] // 16 * 16]).unflatten(0, (-1, 16)).mean(1)"
    assert text.count(old) == 1, "the means' line was not found"   # (the CUDA's IR comment has it unindented)
    stem = path.rsplit("/", 1)[-1][:-3]
    for name, forward in FORWARDS.items():
        variant = text.replace(old, "        return _KgenWindowMeans.apply(_kgen_w, 16)")
        variant = re.sub(r"\n\nclass ModelNew\(", FUNCTION.replace("FORWARD", forward) + "\nclass ModelNew(", variant, count=1)
        with open(f"{outdir}/{stem.replace('_new', '')}_{name}.py", "w") as f:
            f.write(variant)


if __name__ == "__main__":
    main(*sys.argv[1:])
