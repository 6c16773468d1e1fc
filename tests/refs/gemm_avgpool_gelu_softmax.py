import torch, torch.nn as nn, torch.nn.functional as F
class Model(nn.Module):
    """Linear -> AvgPool1d(3, stride 2) over the features -> GELU -> Softmax (a pooled tile output)."""
    def __init__(self, in_features, out_features, kernel_size, stride):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.kernel_size = kernel_size
        self.stride = stride
    def forward(self, x):
        x = self.gemm(x)
        x = F.avg_pool1d(x.unsqueeze(1), kernel_size=self.kernel_size, stride=self.stride).squeeze(1)
        x = F.gelu(x)
        return torch.softmax(x, dim=1)
batch_size = 1024
in_features = 8192
out_features = 8192
kernel_size = 3
stride = 2
def get_inputs():
    return [torch.rand(batch_size, in_features)]
def get_init_inputs():
    return [in_features, out_features, kernel_size, stride]
