# Session 61: settings kept in a config object, a dict and a dataclass, read in forward (the guard of
# nested settings, c941aeb / d971ea1), with unbound torch.Tensor methods (respell60's
# `unbound_methods_traced`), for kgen validate on the GPU: the file computes with the traced values
# and refuses a ModelNew built with others.
from dataclasses import dataclass
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class Settings:
    scale: float = 0.5
    clamp: float = 3.0


class Model(nn.Module):
    def __init__(self, in_features, out_features, slope=0.05):
        super(Model, self).__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.cfg = SimpleNamespace(slope=slope, act={"kind": "gelu", "approximate": "none"})
        self.settings = Settings()

    def forward(self, x):
        y = torch.Tensor.add(self.fc(x), 0.25)
        y = F.leaky_relu(y, self.cfg.slope)
        y = F.gelu(y, approximate=self.cfg.act["approximate"])
        y = torch.Tensor.mul(y, self.settings.scale)
        return torch.Tensor.clamp(y, -self.settings.clamp, self.settings.clamp)


def get_inputs():
    return [torch.randn(512, 1024)]


def get_init_inputs():
    return [1024, 2048]
