# Chains for the capture's data flow (tests/rules/capture/test_chains_torch.cpp):
# an HF-style RMSNorm module (pow, mean, add, rsqrt, mul, mul), a group_norm
# followed by SiLU, exp whose output two ops read (no chain through it), and
# MinGPT's GELU as a module, one instance inside a block and one outside (its
# data flow branches: a module's whole forward is still one chain).
import math

import torch


class RMSNorm(torch.nn.Module):  # as Hugging Face's LlamaRMSNorm spells it
    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(hidden))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class NewGELU(torch.nn.Module):  # as MinGPT spells it
    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.act = NewGELU()

    def forward(self, x):
        return self.act(x)


torch.manual_seed(0)
norm, gn, block, act = RMSNorm(64), torch.nn.GroupNorm(4, 16), Block(), NewGELU()
x, img, z, g = torch.randn(4, 32, 64), torch.randn(2, 16, 8, 8), torch.randn(256), torch.randn(8, 96)
with torch.no_grad():
    for _ in range(3):
        a = norm(x)
        b = torch.nn.functional.silu(gn(img))
        e = torch.exp(z)
        c = e * 2 + e
        d = block(g) - act(g)  # sub: no entry shared with the forward's ops
print(float(a.sum()), float(b.sum()), float(c.sum()), float(d.sum()))
