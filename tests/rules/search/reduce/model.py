# Every kind of call the reduce family (and mean_hw's generic strategy) takes,
# on the CPU: rows (the last dim), columns (the middle dim, the first with
# keepdim), every dim, several dims, a sliced (non-contiguous) input, indices
# (argmax over columns, argmin over bf16 rows with ties), max.dim's pair,
# 2-norms of rows and of everything, a 1-norm of columns; and value reductions
# over two runs of dims with the kept one between (dims 0 and 2: a mean, an
# amax, a 2-norm).
# tests/rules/search/test_reduce_torch.cpp builds it.
import torch

torch.manual_seed(0)
x = torch.randn(16, 64, 48)
with torch.no_grad():
    for _ in range(2):
        out = [x.sum(-1), x.sum(1), x.sum(0, keepdim=True), x.sum(), x.mean(1), torch.amax(x, dim=(1, 2)),
               torch.argmax(x, dim=1), torch.argmin(x.bfloat16(), dim=-1), torch.max(x, dim=-1)[0],
               torch.prod(x[:, :8], dim=1), torch.norm(x, dim=-1), torch.norm(x),
               torch.linalg.vector_norm(x, ord=1, dim=1), x.mean((0, 2)), torch.amax(x, dim=(0, 2)),
               torch.linalg.vector_norm(x, dim=(0, 2))]
print(sum(float(t.float().sum()) for t in out))
