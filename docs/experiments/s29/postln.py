import torch
import torch.nn as nn


class Model(nn.Module):
    """A post-norm residual block: LayerNorm(x + Dropout(Linear(x)))."""

    def __init__(self, d_model, p):
        super().__init__()
        self.proj = nn.Linear(d_model, d_model)
        self.drop = nn.Dropout(p)
        self.norm = nn.LayerNorm(d_model)

    def forward(self, x):
        return self.norm(x + self.drop(self.proj(x)))


batch_size = 4096
d_model = 4096


def get_inputs():
    return [torch.randn(batch_size, d_model)]


def get_init_inputs():
    return [d_model, 0.1]
