import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear -> sum -> max -> mean -> logsumexp -> logsumexp over dim 1 (KernelBench level 2,
    problem 18): after the sum every reduction is over a width-1 value."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = self.linear(x)
        x = torch.sum(x, dim=1, keepdim=True)
        x = torch.max(x, dim=1, keepdim=True)[0]
        x = torch.mean(x, dim=1, keepdim=True)
        x = torch.logsumexp(x, dim=1, keepdim=True)
        x = torch.logsumexp(x, dim=1, keepdim=True)
        return x


batch_size = 1024
in_features = 8192
out_features = 8192


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
