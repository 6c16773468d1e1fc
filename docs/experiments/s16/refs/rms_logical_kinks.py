import math

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 256
in_features = 1024
out_features = 512


class Model(nn.Module):
    """Linear, RMSNorm, a band mask made with & and ~ (continuous at its edges: kinks, no jumps),
    a softmax without a dim over the features
    scaled by 1/sqrt(N) read from x.size(-1), a number made with torch.tensor on x's device; its
    get_inputs() puts the input on the GPU (spellings others write, session 16)."""

    def __init__(self, in_features, out_features):
        super(Model, self).__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.norm = nn.RMSNorm(out_features)
        self.sm = nn.Softmax()

    def forward(self, x):
        x = self.norm(self.fc(x))
        band = (x > -1.0) & ~(x > 1.0)
        x = torch.where(band, x, torch.tensor(0.1, device=x.device, dtype=x.dtype) * x + 0.9 * torch.sign(x))
        return self.sm(x / math.sqrt(x.size(-1))) + 0.01 * x


def get_inputs():
    return [torch.randn(batch_size, in_features).cuda()]


def get_init_inputs():
    return [in_features, out_features]
