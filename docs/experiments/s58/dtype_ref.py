# Session 58: spellings probe 58 (dtypes) took, for kgen validate on the GPU in fp32 and bf16:
# casts to another value's dtype (self.s.to(y.dtype), self.b.type_as(y)) and a tensor made in
# the module's dtype (torch.full_like(y, 0.5, dtype=y.dtype)).
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.s = nn.Parameter(torch.rand(out_features) + 0.5)
        self.b = nn.Parameter(torch.randn(out_features) * 0.1)

    def forward(self, x):
        y = self.fc(x)
        y = y * self.s.to(y.dtype) + self.b.type_as(y)
        y = torch.minimum(y, torch.full_like(y, 0.5, dtype=y.dtype))
        return F.gelu(y)


def get_inputs():
    return [torch.randn(512, 1024)]


def get_init_inputs():
    return [1024, 2048]
