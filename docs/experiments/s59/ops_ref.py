# Session 59: the ops session 58 added after its last device call (torch.logaddexp, logit with
# eps, frac), for kgen validate on the GPU in fp32 and bf16.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super(Model, self).__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.shift = nn.Parameter(torch.randn(out_features) * 0.1)

    def forward(self, x):
        y = self.fc(x)
        y = torch.logaddexp(y, self.shift)
        y = torch.sigmoid(y).logit(eps=1e-3)
        return y + torch.frac(y * 3.0) * 0.5


def get_inputs():
    return [torch.randn(512, 1024)]


def get_init_inputs():
    return [1024, 2048]
