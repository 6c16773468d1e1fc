import torch, torch.nn as nn, torch.nn.functional as F, math
class Model(nn.Module):
    def __init__(self, in_features=512, out_features=256, std_init=0.5):
        super().__init__()
        self.weight_mu = nn.Parameter(torch.empty(out_features, in_features)); self.weight_sigma = nn.Parameter(torch.empty(out_features, in_features))
        self.register_buffer("weight_epsilon", torch.randn(out_features, in_features))
        self.bias_mu = nn.Parameter(torch.empty(out_features)); self.bias_sigma = nn.Parameter(torch.empty(out_features))
        self.register_buffer("bias_epsilon", torch.randn(out_features))
        r = 1 / math.sqrt(in_features)
        self.weight_mu.data.uniform_(-r, r); self.weight_sigma.data.fill_(std_init * r); self.bias_mu.data.uniform_(-r, r); self.bias_sigma.data.fill_(std_init * r)
    def forward(self, x):
        return F.linear(x, self.weight_mu + self.weight_sigma * self.weight_epsilon, self.bias_mu + self.bias_sigma * self.bias_epsilon)
def get_inputs(): return [torch.randn(128, 512)]
def get_init_inputs(): return []
