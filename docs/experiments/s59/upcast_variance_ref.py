# Session 59: a bf16 module that computes a variance as E[h^2] - E[h]^2 in float32 and casts back (taken since
# session 59), for kgen validate on the GPU.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super(Model, self).__init__()
        self.fc = nn.Linear(in_features, out_features, dtype=torch.bfloat16)
        self.w = nn.Parameter(torch.rand(out_features, dtype=torch.bfloat16) + 0.5)

    def forward(self, x):
        y = self.fc(x)
        dt = y.dtype
        h = y.float() + 100.0
        m = h.mean(-1, keepdim=True)
        v = (h * h).mean(-1, keepdim=True) - m * m
        h = (h - m) * torch.rsqrt(v + 1e-5)
        return h.to(dt)


def get_inputs():
    return [torch.randn(512, 1024, dtype=torch.bfloat16)]


def get_init_inputs():
    return [1024, 2048]
