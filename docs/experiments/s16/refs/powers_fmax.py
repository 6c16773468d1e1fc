import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear, a learned per-feature power of |x| + 0.5, torch.fmax with a per-feature floor, a
    max over windows of 4 features sized with c // 4, divided by a parameter's numel()."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.p = nn.Parameter(torch.rand(out_features) + 0.5)
        self.floor = nn.Parameter(torch.randn(out_features) * 0.1)

    def forward(self, x):
        y = self.fc(x)
        y = torch.fmax((y.abs() + 0.5) ** self.p, self.floor) - 0.5 * y
        n, c = y.shape
        return y.view(n, c // 4, 4).amax(dim=-1) / self.p.numel() * 100.0


def get_inputs():
    return [torch.randn(128, 1024)]


def get_init_inputs():
    return [1024, 512]
