# model.py's Swish and QuickGELU under torch.compile (test_chain_module_torch.cpp):
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


torch.manual_seed(0)
a, b = torch.randn(64, 1024), torch.randn(32, 2048)
s, q = torch.compile(Swish()), torch.compile(QuickGELU())
with torch.no_grad():
    for _ in range(3):
        y, z = s(a), q(b)
    ref = torch.nn.functional.silu(a), b * torch.sigmoid(1.702 * b)
print("match", bool(torch.allclose(y, ref[0], atol=1e-5)), bool(torch.allclose(z, ref[1], atol=1e-5)))
