# Chains whose inputs include Python numbers (CPU float64 tensors) on CUDA, and attention scores.
import math, torch
class NewGELU(torch.nn.Module):
    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
class RMSNorm(torch.nn.Module):
    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.linspace(0.5, 1.5, hidden))
        self.variance_epsilon = eps
    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)
class AttnScores(torch.nn.Module):
    def __init__(self, scaling):
        super().__init__()
        self.scaling = scaling
    def forward(self, scores, mask):
        w = scores * self.scaling + mask
        return torch.nn.functional.softmax(w, dim=-1, dtype=torch.float32).to(scores.dtype)
torch.manual_seed(0)
d = "cuda"
g, h = torch.randn(8, 1024, 3072, device=d), torch.randn(4, 2048, 2048, device=d, dtype=torch.bfloat16)
s = torch.randn(2, 8, 1024, 1024, device=d, dtype=torch.bfloat16)
mask = torch.triu(torch.full((1024, 1024), float("-inf"), device=d), 1)[None, None].expand(2, 1, 1024, 1024).contiguous().bfloat16()
gelu, rms, attn = NewGELU(), RMSNorm(2048).to(d).bfloat16(), AttnScores(0.0625)
with torch.no_grad():
    for _ in range(3):
        a, b, c = gelu(g), rms(h), attn(s, mask)
torch.cuda.synchronize()
print(float(a.sum()), float(b.double().sum()), float(c.double().sum()))
