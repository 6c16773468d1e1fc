"""Is an fp32 GEMM from three fp16 products as accurate as eager fp32, and how fast could it be?

Issue 25's fp32-exact GEMM runs 3xTF32 at ~70 % of the TF32 floor, bound by shared memory. fp16
has TF32's 11 significant bits at twice the tensor rate and half the bytes, but 5 exponent bits:
each operand is scaled by a power of two so that its largest finite magnitude lands in
[2^14, 2^15), split into hi = fp16(v) and lo = fp16((v - hi) * 2^11) (lo scaled up so that it
does not underflow), and z = (hi*hi + 2^-11 (hi*lo + lo*hi)) / (sx sw). This probe runs the three
products on cuBLAS (fp16 in, fp32 out) and compares the error against fp64 with eager fp32's and
with 3xTF32's (emulated the same way), per tensor and per row / column scaling, on
KernelBench-like data and on data with a wide dynamic range; then times the products.
"""
import sys
import time

import torch

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
dev = "cuda"


def amax_finite(v, dim=None):
    a = torch.where(torch.isfinite(v), v.abs(), torch.zeros((), device=v.device, dtype=v.dtype))
    return a.amax() if dim is None else a.amax(dim=dim, keepdim=True)


def pow2_scale(amax):
    # 2^(14 - floor(log2 amax)): amax * scale in [2^14, 2^15); 1 where amax is 0.
    e = torch.floor(torch.log2(torch.where(amax > 0, amax, torch.ones_like(amax))))
    return torch.exp2(14 - e)


def split16(v, scale):
    s = v * scale
    hi = s.half()
    lo = ((s - hi.float()) * 2048.0).half()
    return hi, lo


def mm32(a, b):
    return torch.mm(a, b, out_dtype=torch.float32)


def fp16x3(x, w, per_row):
    sx = pow2_scale(amax_finite(x, 1) if per_row else amax_finite(x))
    sw = pow2_scale(amax_finite(w, 1) if per_row else amax_finite(w))
    xh, xl = split16(x, sx)
    wh, wl = split16(w, sw)
    c = mm32(xh, wh.t()) + (mm32(xh, wl.t()) + mm32(xl, wh.t())) * (1.0 / 2048.0)
    return c / (sx * (sw.t() if per_row else sw))


def tf32_round(v):
    # round to nearest, 10 explicit mantissa bits
    i = v.view(torch.int32)
    i = (i + 0x1000) & ~0x1FFF
    return i.view(torch.float32)


def tf32x3(x, w):
    torch.backends.cuda.matmul.allow_tf32 = True
    xh = tf32_round(x); xl = tf32_round(x - xh)
    wh = tf32_round(w); wl = tf32_round(w - wh)
    z = xh @ wh.t() + (xh @ wl.t() + xl @ wh.t())
    torch.backends.cuda.matmul.allow_tf32 = False
    return z


def errors(z, ref):
    d = (z.double() - ref).abs()
    return d.max().item(), (d.max() / ref.abs().max()).item()


def case(name, x, w):
    ref = x.double() @ w.double().t()
    out = {"eager fp32": x @ w.t(), "tf32x3 (emulated)": tf32x3(x, w),
           "fp16x3 per tensor": fp16x3(x, w, False), "fp16x3 per row/col": fp16x3(x, w, True)}
    e0 = errors(out["eager fp32"], ref)[0]
    print(f"  {name}:", flush=True)
    for k, z in out.items():
        a, r = errors(z, ref)
        nan = (torch.isnan(z) != torch.isnan(ref)).sum().item()
        print(f"    {k:20s} max abs {a:.3e} rel-to-max {r:.3e}  x eager {a / e0 if e0 else float('nan'):.2f}  nan-mismatch {nan}")
    del ref, out
    torch.cuda.empty_cache()


def timed(fn, n=20):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(n):
        a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); torch.cuda.synchronize()
        ts.append(a.elapsed_time(b))
    ts.sort()
    return ts[len(ts) // 2]


def main():
    print(torch.cuda.get_device_name(), torch.__version__)
    shapes = [(1024, 8192, 8192), (16384, 4096, 4096), (128, 32768, 32768)]
    if len(sys.argv) > 1:
        shapes = shapes[: int(sys.argv[1])]
    g = torch.Generator(device=dev).manual_seed(0)
    for M, K, N in shapes:
        print(f"M={M} K={K} N={N}", flush=True)
        x = torch.randn(M, K, device=dev, generator=g)
        bound = 1 / K ** 0.5
        w = (torch.rand(N, K, device=dev, generator=g) * 2 - 1) * bound
        case("KernelBench-like (randn x, Linear-init w)", x, w)
        if M * N <= 1024 * 8192:
            rows = torch.exp2(torch.randint(-20, 21, (M, 1), device=dev, generator=g).float())
            cols = torch.exp2(torch.randint(-20, 21, (N, 1), device=dev, generator=g).float())
            case("rows and columns scaled by 2^U(-20, 20)", x * rows, w * cols)
            xo = x.clone(); xo[:, ::97] *= 1e4
            case("every 97th feature 1e4 larger", xo, w)
            xn = x.clone(); xn[3, 5] = float("nan"); xn[7, 1] = float("inf")
            wn = w.clone(); wn[11, 2] = float("nan")
            case("a NaN and an Inf in x, a NaN in w", xn, wn)
            del xo, xn, wn
        # time: eager fp32, one fp16 product, the three products, the splits (torch ops: an upper bound)
        xh = x.half(); wh = w.half()
        t_eager = timed(lambda: x @ w.t())
        t_one = timed(lambda: mm32(xh, wh.t()))
        t_three = timed(lambda: (mm32(xh, wh.t()), mm32(xh, wh.t()), mm32(xh, wh.t())))
        t_split = timed(lambda: (split16(x, 1024.0), split16(w, 1024.0)))
        flops = 2 * M * N * K
        print(f"  eager fp32 {t_eager:.3f} ms; one fp16 product (fp32 out) {t_one:.3f} ms "
              f"({flops / t_one / 1e9:.0f} TFLOP/s); three {t_three:.3f} ms; splits by torch ops {t_split:.3f} ms; "
              f"bytes of one fused split pass (read fp32, write hi+lo) {(M + N) * K * 8 / 1e6:.0f} MB", flush=True)
        del x, w, xh, wh
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
