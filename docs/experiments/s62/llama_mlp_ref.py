import torch, torch.nn as nn, torch.nn.functional as F
class Model(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.gate_proj = nn.Linear(d, h, bias=False); self.up_proj = nn.Linear(d, h, bias=False); self.down_proj = nn.Linear(h, d, bias=False)
    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
def get_inputs(): return [torch.randn(128, 256)]
def get_init_inputs(): return [256, 512]
