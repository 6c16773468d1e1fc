import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self, hidden_size=384, intermediate_size=1536):
        super().__init__()
        self.dense = nn.Linear(intermediate_size, hidden_size)
        self.dropout = nn.Dropout(0.0)
    def forward(self, hidden_states, input_tensor):
        hidden_states = self.dense(hidden_states)
        hidden_states = self.dropout(hidden_states)
        hidden_states = hidden_states + input_tensor
        return hidden_states
def get_inputs(): return [torch.randn(8, 197, 1536), torch.randn(8, 197, 384)]
def get_init_inputs(): return []
