# Chains that are a module's whole forward (tests/rules/package/test_chain_module_torch.cpp):
# Swish, QuickGELU with its factor as an attribute (a Python number the chain
# reads), a GroupNorm submodule followed by SiLU, Hugging Face's RMSNorm,
# attention scores (scale, mask, softmax in float32, cast back); a Swish
# spelled in a plain function, which no forward is. Each
# on its own shape, so no op's calls are shared between chains. Prints one
# checksum per line for the test to compare with a stock run; with
# FORGE_TEST_GRAD=1 the input needs grad (the original forwards must run), and
# with FORGE_TEST_ALPHA the QuickGELU factor changes after the first call.
import math
import os

import torch


class Swish(torch.nn.Module):  # its multiply in place on sigmoid's result: an in-place op in a forward
    def forward(self, x):
        return torch.sigmoid(x).mul_(x)


class QuickGELU(torch.nn.Module):
    def __init__(self, alpha=1.702):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        return x * torch.sigmoid(self.alpha * x)


class GroupNormSiLU(torch.nn.Module):  # a norm and its activation, the norm a submodule
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


class RMSNorm16(torch.nn.Module):  # the same forward, run on bfloat16: x.float() ... .to(bf16) in the chain
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


class NewGELU(torch.nn.Module):  # as MinGPT spells it
    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class AttnScores(torch.nn.Module):  # Hugging Face's eager attention between its matmuls
    def __init__(self, scaling):
        super().__init__()
        self.scaling = scaling

    def forward(self, scores, mask):
        w = scores * self.scaling + mask
        return torch.nn.functional.softmax(w, dim=-1, dtype=torch.float32).to(scores.dtype)


def swish(x):
    return x * torch.sigmoid(x)


torch.manual_seed(0)
a, b, c, img = torch.randn(64, 1024), torch.randn(32, 2048), torch.randn(16, 4096), torch.randn(2, 16, 24, 24)
h, h16, g = torch.randn(4, 32, 256), torch.randn(4, 16, 320, dtype=torch.bfloat16), torch.randn(24, 512)
grad = os.environ.get("FORGE_TEST_GRAD") == "1"
if grad:
    a.requires_grad_(True)
s, q, n, r = Swish(), QuickGELU(), GroupNormSiLU(), RMSNorm(256)
r16, gelu, attn = RMSNorm16(320).to(torch.bfloat16), NewGELU(), AttnScores(0.125)
scores = torch.randn(2, 4, 32, 128, dtype=torch.bfloat16)
mask = torch.triu(torch.full((32, 128), float("-inf")), 97)[None, None].expand(2, 1, 32, 128).contiguous().bfloat16()
with torch.no_grad():  # RMSNorm16 in float64: within 2 bf16 steps of it is right (the roundings may differ by one)
    x64 = h16.double()
    want16 = r16.weight.double() * x64 / x64.pow(2).mean(-1, keepdim=True).add(1e-6).sqrt()
with torch.set_grad_enabled(grad):
    for i in range(4):
        y, z, w, v, u = s(a), q(b), swish(c), n(img), r(h)
        o16, e, att = r16(h16), gelu(g), attn(scores, mask)
        if i == 0 and os.environ.get("FORGE_TEST_ALPHA"):
            q.alpha = float(os.environ["FORGE_TEST_ALPHA"])
        close16 = bool(((o16.double() - want16).abs() <= 2 * 2.0 ** -8 * want16.abs() + 1e-30).all())
        print("%.6f %.6f %.6f %.6f %.6f %d %.6f %.6f" % (float(y.sum()), float(z.sum()), float(w.sum()), float(v.sum()),
                                                       float(u.abs().sum()), close16, float(e.sum()),
                                                       float((att.double() * torch.arange(128.0, dtype=torch.float64)).sum())))
