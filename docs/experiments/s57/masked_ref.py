# Session 57: a module written the way users write a leaky clamp and a NaN guard (masked
# assignment and isnan after the GEMM), for kgen validate on the GPU.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super(Model, self).__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        y = self.linear(x)
        y[y < 0] = 0.1 * y[y < 0]
        y[torch.isnan(y)] = 0.0
        return y * 2


batch_size = 512
in_features = 1024
out_features = 768


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
