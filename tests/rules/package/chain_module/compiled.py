# model.py's Swish, QuickGELU, GroupNormSiLU, RMSNorm, RMSNorm16, NewGELU and AttnScores under torch.compile (test_chain_module_torch.cpp):
# the same classes, so the same chains; compiled graphs call the forged chain
# op where the package routes it. Prints whether the outputs match eager math.
import math

import torch


class Swish(torch.nn.Module):  # the multiply in place, as model.py's: functionalized to mul.Tensor here
    def forward(self, x):
        return torch.sigmoid(x).mul_(x)


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


class RMSNorm16(RMSNorm):  # model.py's class of that name: RMSNorm's forward, run on bfloat16
    pass


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


torch.manual_seed(0)
a, b, img, h = torch.randn(64, 1024), torch.randn(32, 2048), torch.randn(2, 16, 24, 24), torch.randn(4, 32, 256)
h16, g = torch.randn(4, 16, 320, dtype=torch.bfloat16), torch.randn(24, 512)
gn, rms, rms16 = GroupNormSiLU(), RMSNorm(256), RMSNorm16(320).to(torch.bfloat16)
s, q, n, r = torch.compile(Swish()), torch.compile(QuickGELU()), torch.compile(gn), torch.compile(rms)
r16, e, attn = torch.compile(rms16), torch.compile(NewGELU()), torch.compile(AttnScores(0.125))
scores = torch.randn(2, 4, 32, 128, dtype=torch.bfloat16)
mask = torch.triu(torch.full((32, 128), float("-inf")), 97)[None, None].expand(2, 1, 32, 128).contiguous().bfloat16()
with torch.no_grad():
    for _ in range(3):
        y, z, v, u, o16, ge, att = s(a), q(b), n(img), r(h), r16(h16), e(g), attn(scores, mask)
    want16 = (rms16.weight.double() * h16.double() / h16.double().pow(2).mean(-1, keepdim=True).add(1e-6).sqrt())
    ref = (torch.nn.functional.silu(a), b * torch.sigmoid(1.702 * b),
           torch.nn.functional.silu(torch.nn.functional.group_norm(img.double(), 4, gn.norm.weight.double(),
                                                                   gn.norm.bias.double())).float(),
           (rms.weight.double() * h.double() / h.double().pow(2).mean(-1, keepdim=True).add(1e-6).sqrt()).float(),
           None, torch.nn.functional.gelu(g, approximate="tanh"))
close = [bool(torch.allclose(o, r, atol=1e-5)) for o, r in zip((y, z, v, u), ref[:4])]
close.append(bool(((o16.double() - want16).abs() <= 2 * 2.0 ** -8 * want16.abs() + 1e-30).all()))
close.append(bool(torch.allclose(ge, ref[5], atol=1e-5)))
want_att = torch.softmax(scores.double() * 0.125 + mask.double(), dim=-1)  # within one bf16 step
close.append(bool(((att.double() - want_att).abs() <= 2.0 ** -8 * want_att + 1e-30).all()))
print("match", *close)
