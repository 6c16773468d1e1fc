# Session 59: a bf16 module with Gemma's RMSNorm (its weight upcast too: 1 + w in float32), for
# kgen validate on the GPU.
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
        h = y.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        h = h * (1.0 + self.w.float())
        return h.type_as(y)


def get_inputs():
    return [torch.randn(512, 1024, dtype=torch.bfloat16)]


def get_init_inputs():
    return [1024, 2048]
