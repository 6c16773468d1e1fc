# Session 59: the same RMSNorm as upcast_rmsnorm_ref.py without the casts (in bf16
# throughout, as eager runs it), the yardstick of that file's gate on the GPU.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super(Model, self).__init__()
        self.fc = nn.Linear(in_features, out_features, dtype=torch.bfloat16)
        self.w = nn.Parameter(torch.rand(out_features, dtype=torch.bfloat16) + 0.5)

    def forward(self, x):
        y = self.fc(x)
        h = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + 1e-6)
        return self.w * h


def get_inputs():
    return [torch.randn(512, 1024, dtype=torch.bfloat16)]


def get_init_inputs():
    return [1024, 2048]
