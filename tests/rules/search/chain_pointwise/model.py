# Chains for the library's fused kernels (tests/rules/search/test_chain_search_torch.cpp):
# Swish (sigmoid, mul), MinGPT's GELU spelled out in a function (pow, mul,
# add, mul, tanh, add, then a mul by 0.5 * x computed beside the chain: no
# module's forward, so only the straight run is a chain), and a GroupNorm
# followed by SiLU, which no pointwise kernel fuses. Each on its own shape, so
# no op's calls are shared between chains.
import math

import torch


def new_gelu(x):  # as MinGPT spells it
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


torch.manual_seed(0)
gn = torch.nn.GroupNorm(4, 16)
a, b, img = torch.randn(64, 1024), torch.randn(32, 2048), torch.randn(2, 16, 16, 16)
with torch.no_grad():
    for _ in range(3):
        s = a * torch.sigmoid(a)
        g = new_gelu(b)
        n = torch.nn.functional.silu(gn(img))
print(float(s.sum()), float(g.sum()), float(n.sum()))
