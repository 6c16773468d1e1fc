# Session 60: an fp16 module whose reductions torch computes in float32 inside and rounds once
# (torch.var, F.normalize's 2-norm, F.rms_norm; the probe's to_opmath: rounded at each step,
# fp16's squares overflowed from |y| > 256), at activations of a few hundred, and a remainder by a
# number (its divisor in the module's dtype, as torch's CUDA kernel takes it), for kgen validate.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super(Model, self).__init__()
        self.fc = nn.Linear(in_features, out_features, dtype=torch.float16)
        with torch.no_grad():
            self.fc.weight.mul_(30.0)

    def forward(self, x):
        y = self.fc(x)
        v = y.var(dim=1, keepdim=True)
        n = F.normalize(y, dim=1)
        r = F.rms_norm(y, (y.shape[-1],))
        return n * 10.0 + r * 0.5 + torch.log1p(v) * 0.01 + (y % 0.7)


def get_inputs():
    return [torch.randn(512, 1024, dtype=torch.float16)]


def get_init_inputs():
    return [1024, 2048]
