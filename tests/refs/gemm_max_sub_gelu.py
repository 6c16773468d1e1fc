import torch, torch.nn as nn
class Model(nn.Module):
    """Linear -> max(dim 1, keepdim) -> minus its mean over dim 1 -> GELU: the mean of a width-1 value is itself, so the output is GELU(0) = 0 (KernelBench level 2, problem 80)."""
    def __init__(self, in_features, out_features, max_dim):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.max_dim = max_dim
    def forward(self, x):
        x = self.gemm(x)
        x = torch.max(x, dim=self.max_dim, keepdim=True).values
        x = x - x.mean(dim=1, keepdim=True)
        x = torch.nn.functional.gelu(x)
        return x
batch_size = 1024
in_features = 8192
out_features = 8192
max_dim = 1
def get_inputs():
    return [torch.rand(batch_size, in_features)]
def get_init_inputs():
    return [in_features, out_features, max_dim]
