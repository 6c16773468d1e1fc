# Session 14: a row sum without keepdim, unsqueezed back and viewed with the batch read from
# the value: a (batch, 1) output.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        s = torch.sum(torch.relu(self.gemm(x)), dim=1).unsqueeze(1)
        return s.view(s.size(0), -1) * 0.5


def get_inputs():
    return [torch.randn(512, 1024)]


def get_init_inputs():
    return [1024, 2048]
