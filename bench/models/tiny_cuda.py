"""A few CUDA ops, for a quick check that capture works on the GPU."""
import torch
import torch.nn.functional as F

from _timing import run

x = torch.randn(256, 4096, device="cuda", dtype=torch.bfloat16)
run("tiny cuda", lambda: F.layer_norm(torch.softmax(x, -1), (4096,)))
