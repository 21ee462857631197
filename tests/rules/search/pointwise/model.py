# Every kind of call the pointwise and binary families take, on the CPU: the
# op table's unary ops with their scalars, a bfloat16 one, one over a
# transposed view, broadcasting (a bias row, wrapped Python numbers, float and int, maximum
# against a row) and two same-shape inputs. tests/rules/search/test_pointwise_torch.cpp builds it.
import torch
import torch.nn.functional as F

torch.manual_seed(0)
x = torch.randn(48, 80)
y = torch.randn(48, 80)
bias = torch.randn(80)
with torch.no_grad():
    for _ in range(2):
        out = [
            F.relu(x), F.gelu(x), F.gelu(x, approximate="tanh"), F.silu(x.bfloat16()), torch.tanh(x.t()),
            F.mish(x), F.softplus(x), F.selu(x), F.hardswish(x), F.leaky_relu(x, 0.2), torch.clamp(x, min=-0.5),
            x ** 2, x + bias, x * 0.5, x * 3, x / y, torch.maximum(x, bias),
        ]
print(sum(float(t.float().sum()) for t in out))
