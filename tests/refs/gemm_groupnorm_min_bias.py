import torch, torch.nn as nn
class Model(nn.Module):
    """Linear -> GroupNorm(512) -> min(dim 1, keepdim) -> + a (1, N, 1, 1) bias, an output of (1, N, M, 1) (KernelBench level 2, problem 75)."""
    def __init__(self, in_features, out_features, num_groups, bias_shape):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.group_norm = nn.GroupNorm(num_groups, out_features)
        self.bias = nn.Parameter(torch.randn(bias_shape))
    def forward(self, x):
        x = self.gemm(x)
        x = self.group_norm(x)
        x = torch.min(x, dim=1, keepdim=True)[0]
        x = x + self.bias
        return x
batch_size = 1024
in_features = 8192
out_features = 8192
num_groups = 512
def get_inputs():
    return [torch.rand(batch_size, in_features)]
def get_init_inputs():
    return [in_features, out_features, num_groups, (1, out_features, 1, 1)]
