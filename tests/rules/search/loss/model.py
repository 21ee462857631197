# Every kind of call the loss family takes, on the CPU: MSE, smooth L1 (beta
# 1 and 0.5) and Huber losses, reduced by mean and by sum and not reduced, a
# bf16 pair. tests/rules/search/test_loss_torch.cpp builds it.
import torch
import torch.nn.functional as F

torch.manual_seed(0)
x, t = torch.randn(32, 100), torch.randn(32, 100)
with torch.no_grad():
    for _ in range(2):
        out = [F.mse_loss(x, t), F.mse_loss(x, t, reduction="none"), F.smooth_l1_loss(x, t),
               F.smooth_l1_loss(x, t, reduction="sum", beta=0.5), F.huber_loss(x, t, delta=0.5),
               F.huber_loss(x, t, reduction="none"), F.mse_loss(x.bfloat16(), t.bfloat16(), reduction="sum")]
print(sum(float(o.float().sum()) for o in out))
