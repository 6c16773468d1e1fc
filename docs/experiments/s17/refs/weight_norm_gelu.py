"""Session 17: nn.Linear under torch.nn.utils.parametrizations.weight_norm (ParametrizedLinear:
the weight g * v / ||v|| computed on each access), then GELU and a per-feature scale."""
import torch
import torch.nn as nn
from torch.nn.utils.parametrizations import weight_norm

batch_size = 512
in_features = 2048
out_features = 2048


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super(Model, self).__init__()
        self.fc = weight_norm(nn.Linear(in_features, out_features))
        self.scale = nn.Parameter(torch.rand(out_features) + 0.5)

    def forward(self, x):
        return torch.nn.functional.gelu(self.fc(x)) * self.scale


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
