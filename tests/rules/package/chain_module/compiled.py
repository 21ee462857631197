# model.py's Swish, QuickGELU, GroupNormSiLU and RMSNorm under torch.compile (test_chain_module_torch.cpp):
# the same classes, so the same chains; compiled graphs call the forged chain
# op where the package routes it. Prints whether the outputs match eager math.
import torch


class Swish(torch.nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(x)


class QuickGELU(torch.nn.Module):
    def __init__(self, alpha=1.702):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        return x * torch.sigmoid(self.alpha * x)


class GroupNormSiLU(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.GroupNorm(4, 16)

    def forward(self, x):
        return torch.nn.functional.silu(self.norm(x))


class RMSNorm(torch.nn.Module):  # as Hugging Face's LlamaRMSNorm, on float32
    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.linspace(0.5, 1.5, hidden))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


torch.manual_seed(0)
a, b, img, h = torch.randn(64, 1024), torch.randn(32, 2048), torch.randn(2, 16, 24, 24), torch.randn(4, 32, 256)
gn, rms = GroupNormSiLU(), RMSNorm(256)
s, q, n, r = torch.compile(Swish()), torch.compile(QuickGELU()), torch.compile(gn), torch.compile(rms)
with torch.no_grad():
    for _ in range(3):
        y, z, v, u = s(a), q(b), n(img), r(h)
    ref = (torch.nn.functional.silu(a), b * torch.sigmoid(1.702 * b),
           torch.nn.functional.silu(torch.nn.functional.group_norm(img.double(), 4, gn.norm.weight.double(),
                                                                   gn.norm.bias.double())).float(),
           (rms.weight.double() * h.double() / h.double().pow(2).mean(-1, keepdim=True).add(1e-6).sqrt()).float())
print("match", *(bool(torch.allclose(o, r, atol=1e-5)) for o, r in zip((y, z, v, u), ref)))
