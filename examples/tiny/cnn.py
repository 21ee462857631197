"""A small CNN with the ops of a ResNet/VAE block: conv, batch_norm, group_norm,
relu/silu, adaptive_avg_pool2d(1) and a linear head. An ordinary PyTorch script:
nothing in it knows about forge."""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1)
        self.gn = nn.GroupNorm(8, c)

    def forward(self, x):
        y = F.relu(self.bn(self.conv1(x)))
        y = F.silu(self.gn(self.conv2(y)))
        return x + y


class TinyCNN(nn.Module):
    def __init__(self, c=32, classes=10):
        super().__init__()
        self.stem = nn.Conv2d(3, c, 3, padding=1)
        self.blocks = nn.Sequential(Block(c), Block(c))
        self.head = nn.Linear(c, classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.head(x).softmax(dim=-1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = TinyCNN().eval()
    x = torch.randn(args.batch, 3, 32, 32)
    with torch.no_grad():
        for _ in range(args.steps):
            probs = model(x)
    print("cnn ok", tuple(probs.shape), float(probs.sum()))


if __name__ == "__main__":
    main()
