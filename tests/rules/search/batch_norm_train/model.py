# Every kind of call the training-mode batch_norm template takes, on the CPU:
# BatchNorm2d and BatchNorm1d in training mode (running statistics updated by
# the call) and InstanceNorm2d (native_batch_norm on [1, N*C, H, W] without
# running statistics), float32.
# tests/rules/search/test_batch_norm_train_torch.cpp builds it.
import torch

torch.manual_seed(0)
bn2 = torch.nn.BatchNorm2d(32)
bn1 = torch.nn.BatchNorm1d(64)
inorm = torch.nn.InstanceNorm2d(16, affine=True)
x2, x1 = torch.randn(8, 32, 16, 16), torch.randn(128, 64)
xi = torch.randn(4, 16, 20, 20) * 3 + 1
with torch.no_grad():
    for _ in range(2):
        out = [bn2(x2), bn1(x1), inorm(xi)]
print(sum(float(t.float().sum()) for t in out), float(bn2.running_var.sum()))
