"""ResNet-50, batch 64, bf16, random weights (torchvision)."""
import torch
import torchvision

from _timing import run

model = torchvision.models.resnet50().cuda().to(torch.bfloat16).eval()
x = torch.randn(64, 3, 224, 224, device="cuda", dtype=torch.bfloat16)
run("resnet50 b64 bf16", lambda: model(x))
