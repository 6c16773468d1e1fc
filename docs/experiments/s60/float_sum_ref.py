# Session 60: a bf16 module that upcasts its Linear's output before a row sum (session 59 noticed
# that the matrix-vector rewrite does not see through the cast): what such a file costs.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super(Model, self).__init__()
        self.fc = nn.Linear(in_features, out_features, dtype=torch.bfloat16)

    def forward(self, x):
        return self.fc(x).float().sum(1, keepdim=True).to(x.dtype)


def get_inputs():
    return [torch.randn(1024, 8192, dtype=torch.bfloat16)]


def get_init_inputs():
    return [8192, 8192]
