import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self, d_model=256, d_ff=1024, dropout_rate=0.1):
        super().__init__()
        self.wi = nn.Linear(d_model, d_ff, bias=False); self.wo = nn.Linear(d_ff, d_model, bias=False)
        self.dropout = nn.Dropout(dropout_rate); self.act = nn.ReLU()
    def forward(self, hidden_states):
        hidden_states = self.wi(hidden_states)
        hidden_states = self.act(hidden_states)
        hidden_states = self.dropout(hidden_states)
        hidden_states = self.wo(hidden_states)
        return hidden_states
def get_inputs(): return [torch.randn(4, 64, 256)]
def get_init_inputs(): return []
