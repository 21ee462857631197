# Every kind of call the pool family takes, on the CPU: 2D max pooling with
# and without padding, ceil_mode and dilation, 3D max pooling, 2D/3D average
# pooling with count_include_pad off and
# a divisor_override, 1D average pooling (avg_pool2d), 1D max pooling
# (max_pool1d, computed inside its composite), a bf16 input; windows nearly as
# wide as the row (the template's planes-per-lane path) in 1D and 2D.
# tests/rules/search/test_pool_torch.cpp builds it.
import torch
import torch.nn.functional as F

torch.manual_seed(0)
x = torch.randn(4, 8, 20, 22)
v = torch.randn(2, 4, 6, 10, 12)
s = torch.randn(4, 8, 50)
with torch.no_grad():
    for _ in range(2):
        out = [F.max_pool2d(x, 2), F.max_pool2d(x, 3, 2, 1, ceil_mode=True), F.max_pool2d(x, 3, 1, 1, dilation=2),
               F.max_pool3d(v, 3, 2, 1),
               F.avg_pool2d(x, 3, 2, 1, count_include_pad=False), F.avg_pool2d(x, 2, divisor_override=3),
               F.avg_pool3d(v, 2), F.avg_pool1d(s, 5, 3, 2), F.max_pool2d(x.bfloat16(), 2),
               F.max_pool1d(s, 4, 2, 1, dilation=2), F.max_pool1d(s, 7), F.avg_pool2d(x, 9)]
print(sum(float(t.float().sum()) for t in out))
