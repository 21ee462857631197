# Every kind of call the scan family takes, on the CPU: cumsum and cumprod
# along rows (the last dim), along a middle dim (columns) and the first, a
# bf16 row with a float32 result, and KernelBench's reversed and exclusive
# cumsums. tests/rules/search/test_scan_torch.cpp builds it.
import torch

torch.manual_seed(0)
x = torch.rand(16, 64, 48)
with torch.no_grad():
    for _ in range(2):
        out = [x.cumsum(-1), torch.cumprod(x, dim=-1), x.cumsum(1), torch.cumprod(x, 0),
               torch.cumsum(x.bfloat16(), dim=1, dtype=torch.float32), x.flip(2).cumsum(2).flip(2)]
print(sum(float(t.float().sum()) for t in out))
