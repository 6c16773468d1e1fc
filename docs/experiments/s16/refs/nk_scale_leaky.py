import torch
import torch.nn as nn

batch_size = 1024
input_size = 8192
hidden_size = 8192


class Model(nn.Module):
    """x @ W.t() + b with W stored (out, in), then a scale and a LeakyReLU (KernelBench 12's chain
    written with raw parameters in nn.Linear's layout)."""

    def __init__(self, input_size, hidden_size, multiplier=2.0):
        super(Model, self).__init__()
        self.W = nn.Parameter(torch.randn(hidden_size, input_size) / input_size ** 0.5)
        self.b = nn.Parameter(torch.zeros(hidden_size))
        self.multiplier = multiplier

    def forward(self, x):
        h = torch.matmul(x, self.W.t()) + self.b
        return torch.nn.functional.leaky_relu(h * self.multiplier, 0.1)


def get_inputs():
    return [torch.randn(batch_size, input_size)]


def get_init_inputs():
    return [input_size, hidden_size]
