# Session 59: a floor division of a buffer (no gradient recorded: the reference trains), for
# kgen validate's training check on the GPU; before 59 the emitted file's backward raised.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super(Model, self).__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.register_buffer("c", torch.tensor(5.0))

    def forward(self, x):
        y = self.fc(x)
        return torch.sigmoid(y * (self.c // 2))


def get_inputs():
    return [torch.randn(512, 1024)]


def get_init_inputs():
    return [1024, 2048]
