# Session 61: HuggingFace's BertOutput as written there (a dense layer of the intermediate states, a
# dropout, a LayerNorm of it plus the block's input): a forward of two tensors, for kgen validate.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, intermediate_size, hidden_size, layer_norm_eps=1e-12, hidden_dropout_prob=0.1):
        super().__init__()
        self.dense = nn.Linear(intermediate_size, hidden_size)
        self.LayerNorm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.dropout = nn.Dropout(hidden_dropout_prob)

    def forward(self, hidden_states, input_tensor):
        hidden_states = self.dense(hidden_states)
        hidden_states = self.dropout(hidden_states)
        hidden_states = self.LayerNorm(hidden_states + input_tensor)
        return hidden_states


def get_inputs():
    return [torch.randn(512, 3072), torch.randn(512, 768)]


def get_init_inputs():
    return [3072, 768]
