import math
import functools
import dataclasses
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

import enum


class Act(enum.Enum):
    GELU = "gelu"
    PRELU = "prelu"


class Model(nn.Module):
    def __init__(self, in_features, out_features, act):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.act = nn.PReLU(out_features) if act is Act.PRELU else nn.GELU()

    def forward(self, x):
        return self.act(self.fc(x))


batch_size = 64
in_features = 256
out_features = 512


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, Act.PRELU]
