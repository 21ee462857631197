"""A Qwen-3-MoE-like causal LM (2 layers, 128 experts, top-8, eager attention)
from a config with random weights: prefill of 2 x 1024 tokens, bf16."""
import torch
from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

from _timing import run

cfg = Qwen3MoeConfig(hidden_size=2048, intermediate_size=6144, moe_intermediate_size=512,
                     num_hidden_layers=2, num_attention_heads=16, num_key_value_heads=2,
                     num_experts=128, num_experts_per_tok=8, vocab_size=151936,
                     attn_implementation="eager")
model = Qwen3MoeForCausalLM(cfg).cuda().to(torch.bfloat16).eval()
ids = torch.randint(0, cfg.vocab_size, (2, 1024), device="cuda")
run("qwen-moe-like prefill 2x1024 bf16", lambda: model(ids))
