# model.py's Swish, QuickGELU and GroupNormSiLU under torch.compile (test_chain_module_torch.cpp):
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


torch.manual_seed(0)
a, b, img = torch.randn(64, 1024), torch.randn(32, 2048), torch.randn(2, 16, 24, 24)
gn = GroupNormSiLU()
s, q, n = torch.compile(Swish()), torch.compile(QuickGELU()), torch.compile(gn)
with torch.no_grad():
    for _ in range(3):
        y, z, v = s(a), q(b), n(img)
    ref = (torch.nn.functional.silu(a), b * torch.sigmoid(1.702 * b),
           torch.nn.functional.silu(torch.nn.functional.group_norm(img.double(), 4, gn.norm.weight.double(),
                                                                   gn.norm.bias.double())).float())
print("match", *(bool(torch.allclose(o, r, atol=1e-5)) for o, r in zip((y, z, v), ref)))
