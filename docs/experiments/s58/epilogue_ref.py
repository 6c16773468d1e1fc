# Session 58: spellings probe 58 (epilogue) took, for kgen validate on the GPU: a filled operand
# broadcast (self.k * torch.ones_like(y)), .item() of a one-element parameter, adaptive 1-d
# pooling to a size dividing the features, torch.absolute.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super(Model, self).__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.k = nn.Parameter(torch.tensor(0.25))
        self.pool = nn.AdaptiveAvgPool1d(out_features // 4)

    def forward(self, x):
        y = self.fc(x)
        y = torch.maximum(y, self.k * torch.ones_like(y))
        y = y * self.k.item()
        y = self.pool(y.unsqueeze(1)).squeeze(1)
        return torch.absolute(y)


def get_inputs():
    return [torch.randn(512, 1024)]


def get_init_inputs():
    return [1024, 2048]
