# Session 14: row statistics written with torch.var_mean, Tensor.std without keepdim (unsqueezed
# back), a 2-norm and softmin, as another author might write a normalization by hand.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = self.fc(x)
        var, mean = torch.var_mean(x, dim=1, keepdim=True)
        x = (x - mean) / torch.sqrt(var + 1e-5)
        x = x * torch.sigmoid(x.std(dim=-1)).unsqueeze(1)
        x = x / x.norm(p=2, dim=1, keepdim=True).clamp_min(1e-6)
        return F.softmin(x * 10.0, dim=1)


def get_inputs():
    return [torch.randn(512, 1024)]


def get_init_inputs():
    return [1024, 2048]
