import torch, torch.nn as nn
torch.manual_seed(0)
x = torch.randn(64, 32)
ln = nn.LayerNorm(64)
with torch.no_grad():
    for _ in range(3):
        y = ln(x.t())  # a transposed (non-contiguous) input: strides (1, 32)
print(float(y.sum()))
