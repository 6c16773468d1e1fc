"""Session 9 (H100): does kgen's bf16 GEMM round the Linear's output as cuBLAS does, bit for bit?

KernelBench's bf16 eval fails 41, 75, 88 and 97 (BatchNorm / GroupNorm after the Linear) where
kgen's bf16 output differs from eager's by one bf16 step of the Linear's output, amplified by
the normalization. Here, on Linear -> ReLU modules (with and without bias) in bf16: how many of
kgen's outputs differ from eager's, by how much, which of the two is nearer fp64 there, which
cuBLAS kernel eager runs, and whether torch's reduced-precision-reduction switch changes eager.

    python3 bf16_gemm_bits.py FILE_WITH_BIAS FILE_WITHOUT_BIAS   (files from kgen generate --dtype bf16)
"""
import importlib.util
import sys

import torch
import torch.nn.functional as F


def load(path):
    spec = importlib.util.spec_from_file_location(f"m{abs(hash(path))}", path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def compare(path, label, shape=(1024, 8192, 8192)):
    M, K, N = shape
    m = load(path)
    torch.manual_seed(0)
    ref = m._reference.Model(K, N)   # the reference class the file carries
    new = m.ModelNew(K, N)
    new.load_state_dict(ref.state_dict())
    ref = ref.cuda().to(torch.bfloat16)
    new = new.cuda().to(torch.bfloat16)
    x = torch.rand(M, K, device="cuda").to(torch.bfloat16)
    with torch.no_grad():
        a, b = ref(x), new(x)
        W = ref.linear.weight
        bias = ref.linear.bias
        exact = x.double() @ W.double().t() + (bias.double() if bias is not None else 0)
        exact = torch.relu(exact)
        plain = F.linear(x, W, bias)
        mm = x @ W.t()
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
        strict = F.linear(x, W, bias)
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = True
    torch.cuda.synchronize()
    diff = (a.float() - b.float()).abs()
    differ = diff > 0
    n = int(differ.sum())
    nearer_kgen = int(((b.double() - exact).abs() < (a.double() - exact).abs())[differ].sum())
    ulps = diff[differ] / torch.relu(a.float()).clamp_min(1e-30)[differ] if n else diff[differ]
    print(f"{label}: {n} of {a.numel()} outputs differ from eager (max {diff.max().item():.3g}; "
          f"relative {ulps.max().item() if n else 0:.3g}); kgen nearer fp64 at {nearer_kgen} of them")
    print(f"  eager's own: F.linear vs x @ W.t() (+ bias): "
          f"{int((torch.relu(plain) != a).sum())} / {int((torch.relu(mm + (bias if bias is not None else 0)) != a).sum())} "
          f"differ; with allow_bf16_reduced_precision_reduction=False: {int((torch.relu(strict) != a).sum())} differ")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        with torch.no_grad():
            ref(x)
            torch.cuda.synchronize()
    names = sorted({e.name for e in prof.events() if e.device_type == torch.profiler.DeviceType.CUDA})
    print("  eager's kernels:", "; ".join(n[:110] for n in names))


if __name__ == "__main__":
    print("torch", torch.__version__, torch.cuda.get_device_name())
    compare(sys.argv[1], "Linear(bias) -> ReLU, bf16")
    compare(sys.argv[2], "Linear(no bias) -> ReLU, bf16")
