import torch, torch.nn as nn
class Model(nn.Module):
    """Linear -> Dropout(0.2) -> x 2 -> softmax (a KernelBench level-2 shape): dropout is the identity in eval mode; the emitted file refuses training mode."""
    def __init__(self, in_features, out_features, dropout_p):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.dropout = nn.Dropout(dropout_p)
    def forward(self, x):
        x = self.matmul(x)
        x = self.dropout(x)
        x = x * 2.0
        x = torch.softmax(x, dim=1)
        return x
batch_size = 1024
in_features = 8192
out_features = 8192
dropout_p = 0.2
def get_inputs():
    return [torch.rand(batch_size, in_features)]
def get_init_inputs():
    return [in_features, out_features, dropout_p]
