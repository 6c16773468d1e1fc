"""Session 17: a bool buffer as a condition (x.masked_fill(self.mask, -inf) before a row
softmax) and as a number (x * self.keep): the kernels read both as 1 and 0 in the module's dtype."""
import torch
import torch.nn as nn

batch_size = 512
in_features = 2048
out_features = 2048


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.register_buffer("mask", torch.arange(out_features) % 7 == 3)
        self.register_buffer("keep", torch.arange(out_features) % 5 != 0)

    def forward(self, x):
        x = self.fc(x) * self.keep
        return x.masked_fill(self.mask, float("-inf")).softmax(dim=1)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
