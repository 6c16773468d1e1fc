# Session 13: nn.PReLU with one weight per feature, and F.prelu with nn.PReLU()'s single weight.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.act = nn.PReLU(out_features, init=0.1)
        self.one = nn.PReLU()

    def forward(self, x):
        x = self.act(self.linear(x))
        return F.prelu(x - 0.5, self.one.weight)


def get_inputs():
    return [torch.randn(512, 1024)]


def get_init_inputs():
    return [1024, 2048]
