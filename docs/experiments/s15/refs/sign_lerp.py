import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.w = nn.Parameter(torch.randn(out_features))

    def forward(self, x):
        x = self.fc(x)
        y = torch.sign(x) * torch.sqrt(torch.abs(x) + 1e-6)
        return torch.lerp(x, y, 0.3) + x.lerp(torch.tanh(x), torch.sigmoid(self.w))

def get_inputs():
    return [torch.randn(128, 1024)]

def get_init_inputs():
    return [1024, 512]
