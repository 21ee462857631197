import torch, torch.nn as nn
torch.manual_seed(0)
bn = nn.BatchNorm2d(8)  # training mode: the call updates running_mean and running_var
x = torch.randn(4, 8, 6, 6)
with torch.no_grad():
    for _ in range(3):
        y = bn(x)
print(float(y.sum()), float(bn.running_mean.sum()))
