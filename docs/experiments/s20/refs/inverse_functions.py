# Session 20: the inverse trigonometric and hyperbolic functions after the GEMM, each inside its
# domain (asinh of the whole range; asin / acos / atanh of a squashed value; acosh of x^2 + 1.5).
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super(Model, self).__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = self.linear(x)
        t = torch.tanh(x) * 0.9
        y = torch.asinh(x * 4.0) + torch.asin(t) - x.sigmoid().acos()
        return y + torch.atanh(t) * 0.5 + torch.acosh(x * x + 1.5)


batch_size = 512
in_features = 1024
out_features = 2048


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
