"""Configs of model_type `llama4_text`, as transformers Llama4TextConfig (its defaults are
Llama 4 Scout's): the family's row (`FAMILY`) and what only it writes."""

from __future__ import annotations

from .family import (
    GLOBAL,
    LOCAL,
    MOE_PARAMS,
    Config,
    Family,
    _decoder_layer,
    _gated_act,
    _head,
    _not_per_layer,
    _windowed_stack,
    key,
)


def _llama4_stack(c: Config) -> str:
    """Layers by `no_rope_layers` (1: RoPE, chunked attention, L2 qk-norm; 0: global,
    no RoPE), as the shortest repeating pattern."""
    rope = c.get("no_rope_layers") or [
        int((i + 1) % c["no_rope_layer_interval"] != 0) for i in range(c["num_hidden_layers"])
    ]
    types = [LOCAL if r else GLOBAL for r in rope]
    field = "no_rope_layers" if c.get("no_rope_layers") else "no_rope_layer_interval"
    return (
        _windowed_stack({**c, "layer_types": types}, field=field)
        .replace("(window = sliding_window)", "(rope = true, chunk = attention_chunk)")
        .replace("(window = 0)", "(rope = false, chunk = 0)")
    )


FAMILY = Family(
    model_types=("llama4_text",),
    reference="transformers Llama4TextConfig (its defaults are Llama 4 Scout's)",
    defaults={
        "vocab_size": 202048,
        "hidden_size": 5120,
        "intermediate_size": 8192,
        "intermediate_size_mlp": 16384,
        "num_hidden_layers": 48,
        "num_attention_heads": 40,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "num_local_experts": 16,
        "num_experts_per_tok": 1,
        "interleave_moe_layer_step": 1,
        "attention_chunk_size": 8192,
        "no_rope_layer_interval": 4,
        "use_qk_norm": True,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
    },
    params=(*MOE_PARAMS, ("attention_chunk", key("attention_chunk_size"))),
    layer=lambda c: _decoder_layer(
        "attention(heads, kv_heads, head_dim, rope = rope, chunk = chunk"
        + (", qk_l2_norm = rope" if c["use_qk_norm"] else "")
        + ")",
        f"moe(experts, top_k, expert_d_ff, shared_experts = 1, act = {_gated_act(c)}, "
        "router = sigmoid)",
    ),
    layer_params="(rope, chunk)",
    model=lambda c: f"embed(vocab)\n{_llama4_stack(c)}\nrmsnorm\n{_head(c)}",
    refuse=(
        (
            "interleave_moe_layer_step",
            lambda c: c["interleave_moe_layer_step"] != 1,
            "dense layers between the MoE ones (Maverick's)",
        ),
        (
            "no_rope_layers",
            lambda c: _not_per_layer(c, "no_rope_layers", (0, 1)),
            "entries other than 0 and 1, or not one per layer,",
        ),
    ),
)
