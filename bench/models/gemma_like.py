"""A Gemma-3-like causal LM (4 layers, eager attention) from a config with random
weights: prefill of 2 x 1024 tokens, bf16."""
import torch
from transformers import Gemma3ForCausalLM, Gemma3TextConfig

from _timing import run

cfg = Gemma3TextConfig(hidden_size=1536, intermediate_size=6144, num_hidden_layers=4,
                       num_attention_heads=8, num_key_value_heads=1, head_dim=256,
                       vocab_size=262144, attn_implementation="eager")
model = Gemma3ForCausalLM(cfg).cuda().to(torch.bfloat16).eval()
ids = torch.randint(0, cfg.vocab_size, (2, 1024), device="cuda")
run("gemma-like prefill 2x1024 bf16", lambda: model(ids))
