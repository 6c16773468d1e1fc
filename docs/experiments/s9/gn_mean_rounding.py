"""Session 9: does torch's CUDA GroupNorm of a bf16 tensor normalize with its mean and 1/std
in fp32, or rounded to bf16 (the dtype of the mean and rstd it returns)? Counts the outputs
of F.group_norm that each reading reproduces, at 88's shape."""
import torch
import torch.nn.functional as F

torch.manual_seed(0)
x = (torch.rand(1024, 8192, device="cuda") * 0.6).to(torch.bfloat16)
w = torch.randn(8192, device="cuda").to(torch.bfloat16)
b = torch.randn(8192, device="cuda").to(torch.bfloat16)
G = 256
y = F.group_norm(x, G, w, b, 1e-5)
_, mean, rstd = torch.ops.aten.native_group_norm(x, w, b, 1024, 8192, 1, G, 1e-5)
xf = x.float().view(1024, G, -1)
for label, m, r in (("bf16 mean/rstd", mean.float(), rstd.float()),):
    m, r = m.view(1024, G, 1), r.view(1024, G, 1)
    t = ((xf - m) * r).double() * w.double().view(1, G, -1) + b.double().view(1, G, -1)  # fma, rounded once
    emu = t.float().to(torch.bfloat16).view(1024, 8192)
    print(f"{label}: {int((emu != y).sum())} of {y.numel()} outputs differ from F.group_norm's")
xm = xf.double().mean(-1, keepdim=True)
xr = 1 / torch.sqrt(xf.double().var(-1, unbiased=False, keepdim=True) + 1e-5)
t = (xf.double() - xm) * xr * w.double().view(1, G, -1) + b.double().view(1, G, -1)
emu = t.float().to(torch.bfloat16).view(1024, 8192)
print(f"fp64 statistics: {int((emu != y).sum())} of {y.numel()} outputs differ from F.group_norm's")
print("returned mean / rstd dtypes:", mean.dtype, rstd.dtype)
