# Session 19: torch.div(..., rounding_mode='floor') by a negative number, then a row softmax
# (torch's gradient of the rounding is zeros: the module trains).
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.fc = nn.Linear(input_size, hidden_size)
        self.scale = nn.Parameter(torch.ones(hidden_size))

    def forward(self, x):
        x = self.fc(x) * self.scale
        x = x + torch.div(x, -3.0, rounding_mode="floor")
        return F.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(256, 512)]


def get_init_inputs():
    return [512, 1024]
