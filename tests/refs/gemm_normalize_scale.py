import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Linear -> L2-normalize each row (F.normalize) -> per-feature scale."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = nn.Parameter(torch.randn(out_features))

    def forward(self, x):
        x = self.linear(x)
        x = F.normalize(x, p=2, dim=1)
        return x * self.scale


batch_size = 1024
in_features = 8192
out_features = 8192


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
