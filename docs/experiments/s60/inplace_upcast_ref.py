# Session 60: a bf16 module whose upcast value is changed in place (b2aef89) and whose parameter is
# upcast with .float() (a98d587), for kgen validate on the GPU.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super(Model, self).__init__()
        self.fc = nn.Linear(in_features, out_features, dtype=torch.bfloat16)
        self.scale = nn.Parameter(torch.rand(out_features, dtype=torch.bfloat16) + 0.5)

    def forward(self, x):
        y = self.fc(x)
        h = y.float()
        h.mul_(torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6))
        h.mul_(self.scale.float())
        h.clamp_(-3.0, 3.0)
        return h.to(y.dtype)


def get_inputs():
    return [torch.randn(512, 1024, dtype=torch.bfloat16)]


def get_init_inputs():
    return [1024, 2048]
