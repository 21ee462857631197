# Chains for the capture's data flow (tests/rules/capture/test_chains_torch.cpp):
# an HF-style RMSNorm module (pow, mean, add, rsqrt, mul, mul), a group_norm
# followed by SiLU, and exp whose output two ops read (no chain through it).
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


torch.manual_seed(0)
norm, gn = RMSNorm(64), torch.nn.GroupNorm(4, 16)
x, img, z = torch.randn(4, 32, 64), torch.randn(2, 16, 8, 8), torch.randn(256)
with torch.no_grad():
    for _ in range(3):
        a = norm(x)
        b = torch.nn.functional.silu(gn(img))
        e = torch.exp(z)
        c = e * 2 + e
print(float(a.sum()), float(b.sum()), float(c.sum()))
