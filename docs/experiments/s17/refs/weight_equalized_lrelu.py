"""Session 17: a weight the forward computes (an equalized learning rate, StyleGAN's: the stored
weight times 1 / sqrt(in_features), in F.linear), then LeakyReLU."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 1024
in_features = 4096
out_features = 4096


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features))
        self.bias = nn.Parameter(torch.zeros(out_features))
        self.scale = (1.0 / in_features) ** 0.5

    def forward(self, x):
        return F.leaky_relu(F.linear(x, self.weight * self.scale, self.bias), 0.2)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
