import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear -> sigmoid -> Linear -> logsumexp(dim 1): two chained GEMMs (issue 10's shape)."""

    def __init__(self, in_features, hidden_features, out_features):
        super().__init__()
        self.linear1 = nn.Linear(in_features, hidden_features)
        self.linear2 = nn.Linear(hidden_features, out_features)

    def forward(self, x):
        x = self.linear1(x)
        x = torch.sigmoid(x)
        x = self.linear2(x)
        x = torch.logsumexp(x, dim=1)
        return x


batch_size = 16384
in_features = 2048
hidden_features = 4096
out_features = 1024


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, hidden_features, out_features]
