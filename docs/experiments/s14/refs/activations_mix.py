# Session 14: activations torch defines from others (logsigmoid, softsign, celu, softshrink,
# threshold, hardshrink, tanhshrink), the new ops expm1 / exp2 / log2 / log10, and a CNN head's
# view(x.size(0), -1) before the Linear, as another author might write them.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super(Model, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.shrink = nn.Softshrink(0.25)
        self.celu = nn.CELU(alpha=0.5)

    def forward(self, x):
        x = self.linear(x.view(x.size(0), -1))
        x = F.logsigmoid(x) + F.softsign(x) * 2.0
        x = self.shrink(self.celu(x))
        x = F.threshold(x, -0.5, 0.1) + F.hardshrink(x, 0.1)
        x = torch.expm1(x * 0.5) + torch.log2(x.abs() + 1.0) - torch.log10(torch.exp2(x) + 1.0)
        return F.tanhshrink(x)


def get_inputs():
    return [torch.randn(512, 1024)]


def get_init_inputs():
    return [1024, 2048]
