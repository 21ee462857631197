# The calls the nll_loss family takes, on the CPU: cross entropy (mean, and
# sum with an ignored class) and nll_loss on one sample.
# tests/rules/search/test_nll_loss_torch.cpp builds it.
import torch
import torch.nn.functional as F

torch.manual_seed(0)
x = torch.randn(64, 100)
t = torch.randint(0, 100, (64,))
with torch.no_grad():
    for _ in range(2):
        out = [F.cross_entropy(x, t), F.cross_entropy(x, t, reduction="sum", ignore_index=3),
               F.nll_loss(F.log_softmax(x[0], dim=0), t[0])]
print(sum(float(o.sum()) for o in out))
