"""Session 17: a reduction over every element as the forward's last op (x.sum() of the
sigmoid of a Linear): the kernel's row sums, then torch's sum of the rows."""
import torch
import torch.nn as nn

batch_size = 512
in_features = 2048
out_features = 2048


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.sigmoid(self.linear(x)).sum()


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
