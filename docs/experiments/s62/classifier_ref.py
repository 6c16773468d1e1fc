import torch, torch.nn as nn
from collections import OrderedDict
class Model(nn.Module):
    def __init__(self, in_dim=512, hid=256, n_cls=10, p=0.5):
        super().__init__()
        self.mlp = nn.Sequential(OrderedDict([("fc1", nn.Linear(in_dim, hid)), ("bn", nn.BatchNorm1d(hid)), ("act", nn.ReLU(inplace=True)), ("drop", nn.Dropout(p)), ("fc2", nn.Linear(hid, n_cls))]))
    def forward(self, x):
        return self.mlp(x)
def get_inputs(): return [torch.randn(128, 512)]
def get_init_inputs(): return []
