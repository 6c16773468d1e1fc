import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear -> cumsum: a scan, outside the epilogue family; kgen refuses it."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = self.linear(x)
        return torch.cumsum(x, dim=1)


batch_size = 64
in_features = 128
out_features = 256


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
