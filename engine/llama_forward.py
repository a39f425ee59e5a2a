"""A compact Llama forward pass with a preallocated KV cache, for the torch backend's decoding loop.

On CPU a decoding step of a small model is mostly framework overhead: transformers' LlamaForCausalLM runs ~40
modules, a `DynamicCache` that concatenates, and a mask builder per token (for the 6-layer passformer,
arithmetic is about a fifth of such a step). This file is the same network as a few tensor operations per
layer (gpt-fast style), reading the weights of a loaded transformers model, with
- fused q/k/v and gate/up projections (one matmul each),
- rotary tables computed once by the model's own rotary module (so every static RoPE variant agrees),
- a KV cache written in place, with a per-row `valid` mask for the holes the backend's lanes leave,
- no language-model head: `forward` returns the final hidden states and the caller multiplies only the rows it
  needs, e.g. the tokens the grammar allows (`head_weight`).

`CompactLlama.supports(model)` says whether a model is a Llama it reproduces; the backend keeps transformers'
own forward for anything else. `tests/engine/test_engine_fast_paths.py` checks it against transformers.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

_STATIC_ROPE = {"default", "linear", "llama3", "yarn"}  # tables do not depend on the sequence length


class KVCache:
    """Keys and values of `rows` sequences, `capacity` slots each, grown by doubling when full."""

    def __init__(self, layers: int, rows: int, kv_heads: int, head_dim: int, capacity: int, dtype, device):
        shape = (rows, kv_heads, capacity, head_dim)
        self.keys = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(layers)]
        self.values = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(layers)]
        self.length = 0  # slots in use (the same for every row; holes are the caller's `valid` mask)

    @property
    def capacity(self) -> int:
        return self.keys[0].shape[2]

    def reserve(self, extra: int) -> None:
        needed = self.length + extra
        if needed <= self.capacity:
            return
        capacity = max(needed, 2 * self.capacity)
        for store in (self.keys, self.values):
            for i, old in enumerate(store):
                grown = old.new_zeros((*old.shape[:2], capacity, old.shape[3]))
                grown[:, :, : self.length] = old[:, :, : self.length]
                store[i] = grown

    def repeat_rows(self, rows: int) -> None:
        """Copy the single row into `rows` rows (the prompt, shared by every lane)."""
        for store in (self.keys, self.values):
            for i, old in enumerate(store):
                store[i] = old.expand(rows, -1, -1, -1).contiguous()


class CompactLlama:
    def __init__(self, model):
        config = model.config
        self.heads = config.num_attention_heads
        self.kv_heads = config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.heads
        self.eps = config.rms_norm_eps
        self.dtype = model.dtype
        self.device = model.device
        decoder = model.model
        self.embed = decoder.embed_tokens.weight
        self.layers = [
            {
                "input_norm": layer.input_layernorm.weight,
                "qkv": torch.cat([getattr(layer.self_attn, f"{n}_proj").weight for n in "qkv"]),
                "o": layer.self_attn.o_proj.weight,
                "post_norm": layer.post_attention_layernorm.weight,
                "gate_up": torch.cat([layer.mlp.gate_proj.weight, layer.mlp.up_proj.weight]),
                "down": layer.mlp.down_proj.weight,
            }
            for layer in decoder.layers
        ]
        self.final_norm = decoder.norm.weight
        self.head_weight = model.get_output_embeddings().weight  # [vocab, hidden]
        self.scaling = model.model.layers[0].self_attn.scaling
        positions = torch.arange(config.max_position_embeddings, device=self.device)[None]
        probe = torch.zeros(1, dtype=self.dtype, device=self.device)
        with torch.no_grad():
            cos, sin = decoder.rotary_emb(probe, positions)
        self.cos, self.sin = cos[0], sin[0]  # [positions, head_dim]

    @staticmethod
    def supports(model) -> bool:
        config = model.config
        rope = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
        return (
            config.model_type == "llama"
            and config.hidden_act == "silu"
            and not getattr(config, "attention_bias", False)
            and not getattr(config, "mlp_bias", False)
            and rope.get("rope_type", "default") in _STATIC_ROPE
            and model.get_output_embeddings().bias is None
        )

    def new_cache(self, capacity: int) -> KVCache:
        return KVCache(len(self.layers), 1, self.kv_heads, self.head_dim, capacity, self.dtype, self.device)

    def forward(
        self, cache: KVCache, input_ids: torch.Tensor, positions: torch.Tensor, valid: torch.Tensor | None
    ) -> torch.Tensor:
        """Append `input_ids` [rows, T] at `positions` to the cache; final hidden states [rows, T, hidden].

        `valid` [rows, cache.length + T]: slots a row may attend to (None: all, i.e. no holes and no padding);
        causality among the new tokens is added here.
        """
        rows, new = input_ids.shape
        cache.reserve(new)
        start, end = cache.length, cache.length + new
        mask = None
        if valid is not None or new > 1:
            key_slots = torch.arange(end, device=self.device)
            causal = key_slots[None, :] <= (start + torch.arange(new, device=self.device))[:, None]
            mask = causal[None, None] if valid is None else causal[None, None] & valid[:, None, None, :]
        cos, sin = self.cos[positions][:, None], self.sin[positions][:, None]  # [rows, 1, T, head_dim]
        hidden = F.embedding(input_ids, self.embed)
        q_size = self.heads * self.head_dim
        for index, layer in enumerate(self.layers):
            x = F.rms_norm(hidden, (hidden.shape[-1],), layer["input_norm"], self.eps)
            qkv = F.linear(x, layer["qkv"]).view(rows, new, -1, self.head_dim).transpose(1, 2)
            qk = _rotate(qkv[:, : self.heads + self.kv_heads], cos, sin)
            q, k = qk[:, : self.heads], qk[:, self.heads :]
            cache.keys[index][:, :, start:end] = k
            cache.values[index][:, :, start:end] = qkv[:, self.heads + self.kv_heads :]
            attention = F.scaled_dot_product_attention(
                q,
                cache.keys[index][:, :, :end],
                cache.values[index][:, :, :end],
                attn_mask=mask,
                scale=self.scaling,
                enable_gqa=self.heads != self.kv_heads,
            )
            hidden = hidden + F.linear(attention.transpose(1, 2).reshape(rows, new, q_size), layer["o"])
            x = F.rms_norm(hidden, (hidden.shape[-1],), layer["post_norm"], self.eps)
            gate, up = F.linear(x, layer["gate_up"]).chunk(2, dim=-1)
            hidden = hidden + F.linear(F.silu(gate) * up, layer["down"])
        cache.length = end
        return F.rms_norm(hidden, (hidden.shape[-1],), self.final_norm, self.eps)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding in transformers' half-split layout: x * cos + rotate_half(x) * sin."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin
