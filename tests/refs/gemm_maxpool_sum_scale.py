import torch, torch.nn as nn
class Model(nn.Module):
    """Linear -> MaxPool1d(2) over the features -> sum(dim 1) -> x 0.5 (KernelBench level 2, problem 55)."""
    def __init__(self, in_features, out_features, kernel_size, scale_factor):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.max_pool = nn.MaxPool1d(kernel_size)
        self.scale_factor = scale_factor
    def forward(self, x):
        x = self.matmul(x)
        x = self.max_pool(x.unsqueeze(1)).squeeze(1)
        x = torch.sum(x, dim=1)
        x = x * self.scale_factor
        return x
batch_size = 128
in_features = 32768
out_features = 32768
kernel_size = 2
scale_factor = 0.5
def get_inputs():
    return [torch.rand(batch_size, in_features)]
def get_init_inputs():
    return [in_features, out_features, kernel_size, scale_factor]
