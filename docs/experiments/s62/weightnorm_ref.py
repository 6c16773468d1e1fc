import torch, torch.nn as nn
from torch.nn.utils.parametrizations import weight_norm
class Model(nn.Module):
    def __init__(self, d=512, n=256):
        super().__init__()
        self.fc = weight_norm(nn.Linear(d, n))
    def forward(self, x):
        return torch.relu(self.fc(x))
def get_inputs(): return [torch.randn(128, 512)]
def get_init_inputs(): return []
