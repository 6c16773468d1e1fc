"""Session 17: a low-rank weight (self.u @ self.v, rank 64) in F.linear, then GELU."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, n_in, n_out, rank):
        super().__init__()
        self.u = nn.Parameter(torch.randn(n_out, rank) / rank ** 0.5)
        self.v = nn.Parameter(torch.randn(rank, n_in) / n_in ** 0.5)
        self.bias = nn.Parameter(torch.zeros(n_out))

    def forward(self, x):
        return F.gelu(F.linear(x, self.u @ self.v, self.bias))


def get_inputs():
    return [torch.randn(512, 2048)]


def get_init_inputs():
    return [2048, 2048, 64]
