# Session 61: a SwiGLU of one Linear's halves plus a residual passed in (a module of two inputs), for
# kgen validate.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, hidden):
        super().__init__()
        self.fc = nn.Linear(in_features, 2 * hidden)

    def forward(self, x, residual):
        gate, up = self.fc(x).chunk(2, dim=-1)
        return F.silu(gate) * up + residual


def get_inputs():
    return [torch.randn(256, 1024), torch.randn(256, 2048)]


def get_init_inputs():
    return [1024, 2048]
