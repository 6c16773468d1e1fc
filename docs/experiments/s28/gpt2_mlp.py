import torch
import torch.nn as nn


class Conv1D(nn.Module):
    """HF GPT-2's Linear: the weight stored (in, out), addmm on a 2-d view."""

    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        x = x.view(size_out)
        return x


class Model(nn.Module):
    """GPT-2's MLP (c_fc -> gelu_new -> c_proj -> dropout), on (tokens, d_model)."""

    def __init__(self, d_model, d_ff, p):
        super().__init__()
        self.c_fc = Conv1D(d_ff, d_model)
        self.c_proj = Conv1D(d_model, d_ff)
        self.act = nn.GELU(approximate="tanh")
        self.dropout = nn.Dropout(p)

    def forward(self, x):
        return self.dropout(self.c_proj(self.act(self.c_fc(x))))


tokens = 4096
d_model = 768
d_ff = 3072


def get_inputs():
    return [torch.randn(tokens, d_model)]


def get_init_inputs():
    return [d_model, d_ff, 0.1]
