import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear, then a log made safe with nan_to_num (its default replacements), plus a residual."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = self.fc(x)
        return torch.nan_to_num(torch.log(x)) * 0.5 + x


def get_inputs():
    return [torch.randn(128, 1024)]


def get_init_inputs():
    return [1024, 512]
