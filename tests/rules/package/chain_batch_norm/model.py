# A ResNet-like block in eval mode: its input through a batch norm and an
# in-place ReLU, then a convolution, a batch norm, the residual added in place
# and the in-place ReLU again. Both batch norms have one signature, so their
# chains (batch norm -> ReLU, batch norm -> add -> ReLU) are told apart in the
# capture's trace, call by call.
import torch
import torch.nn as nn

torch.manual_seed(0)


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.bn0 = nn.BatchNorm2d(c)
        self.relu = nn.ReLU(inplace=True)
        self.conv = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)

    def forward(self, x):
        y = self.relu(self.bn0(x))
        out = self.bn1(self.conv(y))
        out += y
        return self.relu(out)


model = Block(16).eval()
for bn in (model.bn0, model.bn1):
    bn.running_mean.uniform_(-1, 1)
    bn.running_var.uniform_(0.5, 2)
    bn.weight.data.uniform_(0.5, 1.5)
    bn.bias.data.uniform_(-1, 1)
x = torch.randn(2, 16, 32, 32)

if __name__ == "__main__":
    with torch.no_grad():
        for _ in range(3):
            y = model(x)
    print("%.6f" % float(y.double().sum()))
