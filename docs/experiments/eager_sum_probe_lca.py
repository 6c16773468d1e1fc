# Session 8 probe (run on the H100 with `python3 docs/experiments/eager_sum_probe_lca.py`): for each pair
# (i, j), the number of leaves under the two elements' lowest common ancestor in the summation tree
# of torch.sum and of the first eager_sum.cuh (which put the warps before the lanes and shuffled
# 1, 2, 4, ...): the tree shapes matched, the pairings did not.
# FPRev-style probe of a row sum's order: for x = ones with x[i] = B, x[j] = -B (B = 2^40, so the
# ones added into either before they meet are lost), the sum is N - |leaves under LCA(i, j)|.
import sys, torch
sys.path.insert(0, "tests")
import test_eager_sum_gpu as T

class F: pass
import tempfile, pathlib
from torch.utils.cpp_extension import load_inline
from kgen.codegen import generator
import hashlib
source = "".join(generator.kernel_source(f) for f in ("common.cuh", "stages.cuh", "eager_sum.cuh")) + T.KERNEL
ext = load_inline(name="probe_" + hashlib.sha256(source.encode()).hexdigest()[:12], cpp_sources="torch::Tensor row_sums(torch::Tensor x, bool eager);",
                  cuda_sources=source, functions=["row_sums"], extra_cuda_cflags=["-O3", "-std=c++17"],
                  build_directory=tempfile.mkdtemp())
print(torch.__version__, torch.version.cuda, flush=True)
B = 2.0 ** 40

def lca_sizes(fn, M, N, i):
    js = [j for j in range(N) if j != i]
    out = []
    for k in range(0, len(js), M):
        chunk = js[k:k + M]
        x = torch.ones(M, N, device="cuda")
        for r, j in enumerate(chunk):
            x[r, i] = B; x[r, j] = -B
        s = fn(x)[:len(chunk)]
        out += [N - int(v) for v in s.tolist()]
    return dict(zip(js, out))

for M, N in [(64, 31), (16, 100), (1024, 128), (32, 132), (1024, 4096), (1024, 8192), (3, 8192)]:
    for i in (0, 1, 5):
        if N > 2000 and M < 16 and i != 0:
            continue
        t = lca_sizes(lambda x: x.sum(-1), M, N, i)
        m = lca_sizes(lambda x: ext.row_sums(x, True), M, N, i)
        bad = [j for j in t if t[j] != m[j]]
        print(f"M={M} N={N} i={i}: {len(bad)} of {len(t)} pairs differ", flush=True)
        if N <= 132 and i == 0:
            print("  torch:", [t[j] for j in sorted(t)][:140])
            print("  mine: ", [m[j] for j in sorted(m)][:140])
        elif bad:
            print("  first:", [(j, t[j], m[j]) for j in bad[:24]])
            import collections
            print("  torch sizes:", sorted(collections.Counter(t.values()).items())[:20])
            print("  mine sizes: ", sorted(collections.Counter(m.values()).items())[:20])
