# Session 60: KernelBench's form with stateless modules built in forward, kept in a plain list, and
# a slice of the model's Sequential (respell59's fixes), plus torch.clone / detach_ (a detached
# gate), for kgen validate on the GPU.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super(Model, self).__init__()
        self.net = nn.Sequential(nn.Linear(in_features, out_features), nn.GELU(), nn.Tanh())
        self.acts = [nn.ReLU(), nn.Hardtanh(-2.0, 2.0)]

    def forward(self, x):
        y = self.net[:2](x)
        gate = torch.clone(y).detach_()
        y = nn.SiLU()(y) * torch.sigmoid(gate)
        for act in self.acts:
            y = act(y)
        return y


def get_inputs():
    return [torch.randn(512, 1024)]


def get_init_inputs():
    return [1024, 2048]
