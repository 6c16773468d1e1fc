import torch
import torch.nn as nn


class Model(nn.Module):
    """A CNN classifier head: feature maps flattened, then Linear -> ReLU."""

    def __init__(self, channels, size, num_classes):
        super(Model, self).__init__()
        self.fc = nn.Linear(channels * size * size, num_classes)

    def forward(self, x):
        x = x.view(x.size(0), -1)
        x = self.fc(x)
        return torch.relu(x)


batch_size = 128
channels = 64
size = 8
num_classes = 1024


def get_inputs():
    return [torch.randn(batch_size, channels, size, size)]


def get_init_inputs():
    return [channels, size, num_classes]
