import torch, torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0)
x = torch.randn(64, 32)
ln = nn.LayerNorm(64)
with torch.no_grad():
    for _ in range(3):
        y = ln(x.t())                    # a transposed (non-contiguous) input
        s = F.silu(x)
        l = F.log_softmax(x, dim=-1)
        c = torch.flip(x, [1])           # no family.yaml covers flip
        r = torch.rand(16)               # a random-number fill
print(float(y.sum() + s.sum() + l.sum() + c.sum()))
