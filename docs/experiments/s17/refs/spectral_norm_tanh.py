"""Session 17: nn.Linear under torch.nn.utils.parametrizations.spectral_norm (in training mode
each access of the weight runs a power iteration that updates the parametrization's buffers,
as the reference's forward does once), then tanh and a row softmax."""
import torch
import torch.nn as nn
from torch.nn.utils.parametrizations import spectral_norm


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.proj = spectral_norm(nn.Linear(in_features, out_features))

    def forward(self, x):
        return torch.softmax(torch.tanh(self.proj(x)) * 4.0, dim=1)


def get_inputs():
    return [torch.randn(512, 2048)]


def get_init_inputs():
    return [2048, 1024]
