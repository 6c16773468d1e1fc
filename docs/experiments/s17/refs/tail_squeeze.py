"""Session 17: a regression head, Linear(in, 1) then squeeze() with no dim (at a batch of 1
torch's squeeze() gives a 0-d tensor; kgen's file calls torch's own squeeze() last)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features):
        super().__init__()
        self.head = nn.Linear(in_features, 1)

    def forward(self, x):
        return torch.tanh(self.head(x)).squeeze()


def get_inputs():
    return [torch.randn(1024, 4096)]


def get_init_inputs():
    return [4096]
