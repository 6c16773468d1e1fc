# Session 14: functions written by hand as others write them: ReLU as x * (x > 0).float(), a
# LayerNorm from mean and var, a logsumexp from max, exp, sum and log, and .to(x.device).
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features, eps=1e-5):
        super().__init__()
        self.proj = nn.Linear(in_features, out_features)
        self.eps = eps

    def forward(self, x):
        x = self.proj(x.to(x.device))
        x = x * (x > 0).float()
        mean = x.mean(-1, keepdim=True)
        x = (x - mean) / torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + self.eps)
        m = x.max(dim=1, keepdim=True)[0]
        return x - (m + torch.log(torch.sum(torch.exp(x - m), dim=1, keepdim=True)))


def get_inputs():
    return [torch.randn(512, 1024)]


def get_init_inputs():
    return [1024, 2048]
