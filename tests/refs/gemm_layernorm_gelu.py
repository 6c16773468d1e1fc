import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Linear -> LayerNorm over the features -> GELU (constants named as users name them)."""

    def __init__(self, input_size, hidden_size, eps=1e-5):
        super(Model, self).__init__()
        self.fc = nn.Linear(input_size, hidden_size)
        self.norm = nn.LayerNorm(hidden_size, eps=eps)

    def forward(self, x):
        return F.gelu(self.norm(self.fc(x)))


batch = 1024
input_size = 8192
hidden_size = 8192


def get_inputs():
    return [torch.rand(batch, input_size)]


def get_init_inputs():
    return [input_size, hidden_size]
