# Session 60: KernelBench's form with the GEMM written as its transpose transposed back,
# (W @ x.T).T, on hand-declared parameters, then a chained second GEMM the same way, for kgen
# validate on the GPU (fp32 and bf16).
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super(Model, self).__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features) / in_features ** 0.5)
        self.bias = nn.Parameter(torch.zeros(out_features))
        self.proj = nn.Parameter(torch.randn(out_features, out_features) / out_features ** 0.5)

    def forward(self, x):
        h = torch.relu((self.weight @ x.T).T + self.bias)
        return torch.sigmoid(torch.matmul(self.proj, h.t()).t())


def get_inputs():
    return [torch.randn(512, 1024)]


def get_init_inputs():
    return [1024, 2048]
