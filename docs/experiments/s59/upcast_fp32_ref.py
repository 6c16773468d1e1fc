# Session 59: an fp32 module that upcasts to float32 for its softmax and casts back (its file runs bf16 modules since
# session 59), for kgen validate on the GPU.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super(Model, self).__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.w = nn.Parameter(torch.rand(out_features) + 0.5)

    def forward(self, x):
        y = self.fc(x)
        h = torch.softmax(y.float(), dim=-1)
        return h.to(x.dtype)


def get_inputs():
    return [torch.randn(512, 1024)]


def get_init_inputs():
    return [1024, 2048]
