import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear, then session 16's smooth new ops: sin, cos, tan, sinh, cosh, 2 ** x; a bias
    expanded over the batch and a maximum with new_zeros."""

    def __init__(self, in_features, out_features):
        super(Model, self).__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.shift = nn.Parameter(torch.randn(out_features) * 0.1)

    def forward(self, x):
        x = self.fc(x) + self.shift.expand(x.size(0), -1)
        y = torch.sin(x) + 0.5 * x.cos() + 0.1 * torch.tan(0.5 * x) + 0.05 * (torch.sinh(x) + x.cosh())
        y = y + 0.1 * 2.0 ** x
        return torch.max(y, y.new_zeros(y.shape)) + 0.01 * y


def get_inputs():
    return [torch.randn(128, 1024)]


def get_init_inputs():
    return [1024, 512]
