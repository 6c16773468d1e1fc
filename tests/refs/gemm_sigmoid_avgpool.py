import torch, torch.nn as nn
class Model(nn.Module):
    """Linear -> sigmoid -> AvgPool1d(4) over the features: a row stage that is a pooling alone (no
    row reduction or GroupNorm before the output pass; session 33)."""
    def __init__(self, in_features, out_features, kernel_size):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.pool = nn.AvgPool1d(kernel_size)
    def forward(self, x):
        x = torch.sigmoid(self.linear(x))
        return self.pool(x.unsqueeze(1)).squeeze(1)
batch_size = 1024
in_features = 1024
out_features = 4096
kernel_size = 4
def get_inputs():
    return [torch.rand(batch_size, in_features)]
def get_init_inputs():
    return [in_features, out_features, kernel_size]
