# model.py's block under torch.compile: prints whether it matches eager.
import torch

from model import model, x

compiled = torch.compile(model)
with torch.no_grad():
    want = model(x)
    for _ in range(3):
        got = compiled(x)
print("match", torch.allclose(got, want, atol=1e-5, rtol=1e-5))
