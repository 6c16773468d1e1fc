# Session 8 (H100, torch 2.11): `python3 docs/experiments/eager_sum_probe_candidates.py` found the one
# order among these candidates that gives torch.sum's bits at every shape tried: lanes first, halves,
# then warps, halves (kernels/eager_sum.cuh since).
# Which order is torch.sum's? Emulate candidate orders with fp32 tensor adds (each one IEEE
# correctly rounded) and compare bits with torch.sum(-1) on rows of cancelling terms.
import itertools, torch

def last_pow2(n):
    p = 1
    while p <= n // 2: p *= 2
    return p

def config(M, N):  # mirror of eager_sum.cuh's eager_sum_order (torch's setReduceConfig as read)
    vec = 4 if N > 128 else 1
    dim0 = N // vec
    d0 = dim0 if dim0 < 512 else 512
    d0 = last_pow2(d0) if dim0 < 512 else 512
    d1 = last_pow2(M) if M < 512 else 512
    w = min(d0, 32); h = min(d1, 512 // w); w = min(d0, 512 // h)
    values = -(-N // w)
    split = values >= 16 * h or values >= 256
    return w, (h if split else 1), vec

def tree(v, kind):  # v (..., n) -> (...,), n a power of two
    while v.shape[-1] > 1:
        n = v.shape[-1] // 2
        v = v[..., :n] + v[..., n:] if kind == "halves" else v[..., 0::2] + v[..., 1::2]
    return v[..., 0]

def emulate(x, w, h, vec, lane_tree, warp_tree, warp_first, layout):
    M, N = x.shape
    T = w * h
    nv = N // vec
    k = nv // T
    assert k * T == nv, (N, T)
    xv = x.view(M, k, T, vec)
    acc = torch.zeros(M, T, vec, device=x.device)
    for s in range(k):
        acc = acc + xv[:, s]
    t = acc[..., 0]
    for p in range(1, vec):
        t = t + acc[..., p]
    # t: (M, T) thread values, thread index = vector slot
    if layout == "lane_fast":
        g = t.view(M, h, w)        # [warp][lane]
    else:
        g = t.view(M, w, h).transpose(1, 2)
    if h == 1:
        return tree(g[:, 0], lane_tree)
    if warp_first:
        return tree(tree(g.transpose(1, 2), warp_tree), lane_tree)
    return tree(tree(g, lane_tree), warp_tree)

shapes = [(1024, 8192), (128, 8192), (3, 8192), (5, 32768), (1024, 4096), (7, 4096), (1, 4096),
          (1024, 1024), (1024, 512), (1024, 256), (64, 8192), (16, 16384), (1024, 32768), (2048, 1024)]
print(torch.__version__, flush=True)
for M, N in shapes:
    g = torch.Generator(device="cuda").manual_seed(M * 7 + N)
    x = torch.randn(M, N, device="cuda", generator=g) * 1e3
    ref = x.sum(-1)
    w, h, vec = config(M, N)
    hits = []
    for lane_tree, warp_tree, warp_first, layout in itertools.product(("halves", "pairs"), ("halves", "pairs"), (False, True), ("lane_fast", "warp_fast")):
        for ww, hh in {(w, h), (32, 512 // 32 if h > 1 else 1), (min(w, 32), h)}:
            try:
                e = emulate(x, ww, hh, vec, lane_tree, warp_tree, warp_first, layout)
            except AssertionError:
                continue
            if torch.equal(e, ref):
                hits.append((ww, hh, lane_tree, warp_tree, "warps first" if warp_first else "lanes first", layout))
    print(f"M={M} N={N} mine=({w},{h},{vec}): {len(hits)} match: {sorted(set(hits))[:6]}", flush=True)
