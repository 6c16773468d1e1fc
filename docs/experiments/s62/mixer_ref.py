import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self, dim=256, expansion=4):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim, dim*expansion), nn.GELU(), nn.Dropout(0.), nn.Linear(dim*expansion, dim), nn.Dropout(0.))
    def forward(self, x):
        return self.net(x) + x
def get_inputs(): return [torch.randn(16, 64, 256)]
def get_init_inputs(): return []
