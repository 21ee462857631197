# softmax and log_softmax over the last dim and over others, on the CPU (the
# softmax family's row templates and its columns template).
# tests/rules/search/test_softmax_dims_torch.cpp builds it.
import torch

torch.manual_seed(0)
x = torch.randn(8, 48, 40)
with torch.no_grad():
    for _ in range(2):
        out = [torch.log_softmax(x, dim=-1), torch.softmax(x, dim=1), torch.log_softmax(x, dim=0),
               torch.softmax(x.bfloat16(), dim=1)]
print(sum(float(t.float().sum()) for t in out))
