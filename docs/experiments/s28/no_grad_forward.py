import torch
import torch.nn as nn


class Model(nn.Module):
    """An inference-only module: forward under torch.no_grad()."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.scale = nn.Parameter(torch.tensor(1.5))

    def forward(self, x):
        with torch.no_grad():
            return torch.tanh(self.fc(x)) * self.scale


batch_size = 512
in_features = 1024
out_features = 1024


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
