# Session 60: a (batch, tokens, features) input with a LayerScale parameter of shape (1, 1, N)
# and a residual (probe60a's fix: the rows' output put back at the right dimension), for kgen
# validate on the GPU.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim):
        super(Model, self).__init__()
        self.fc = nn.Linear(dim, dim)
        self.gamma = nn.Parameter(0.1 * torch.ones(1, 1, dim))

    def forward(self, x):
        return x + self.gamma * torch.nn.functional.gelu(self.fc(x))


def get_inputs():
    return [torch.randn(4, 128, 1024)]


def get_init_inputs():
    return [1024]
