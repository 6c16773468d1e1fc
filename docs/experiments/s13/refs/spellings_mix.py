# Session 13: spellings a probe of unseen modules met: a CNN head's flatten before the Linear, a
# constant made in forward, true_divide, an in-place torch function, max with its indices dropped.
import torch
from torch import nn
from torch.nn import functional as fn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, input):
        x = self.fc(torch.flatten(input, 1))
        x = torch.true_divide(x, 2.0) * torch.tensor(3.0)
        x = torch.sigmoid_(x)
        top, _ = torch.max(x, dim=1, keepdim=True)
        return fn.softmax(x.subtract(top).flatten(1), dim=-1, dtype=torch.float32)


def get_inputs():
    return [torch.randn(512, 1024)]


def get_init_inputs():
    return [1024, 2048]
