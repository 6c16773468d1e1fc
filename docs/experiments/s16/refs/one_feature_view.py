import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
in_features = 64
out_features = 128


class Model(nn.Module):
    def __init__(self, in_features):
        super().__init__()
        self.fc = nn.Linear(in_features, 1)

    def forward(self, x):
        return torch.sigmoid(self.fc(x)).view(-1)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features]
