"""Configs of model_type `phi3`, as transformers Phi3Config (one qkv_proj, one
gate_up_proj): the family's row (`FAMILY`) and what only it writes."""

from __future__ import annotations

from .family import LLAMA_PARAMS, Family, _decoder_layer, _flags, _gated_act, _llama_model

FAMILY = Family(
    model_types=("phi3",),
    reference="transformers Phi3Config (one qkv_proj, one gate_up_proj)",
    defaults={
        "vocab_size": 32064,
        "hidden_size": 3072,
        "intermediate_size": 8192,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "hidden_act": "silu",
        "sliding_window": None,
        "tie_word_embeddings": False,
    },
    params=LLAMA_PARAMS,
    layer=lambda c: _decoder_layer(
        "attention(heads, kv_heads, head_dim, fused_qkv = true"
        + _flags(window=c.get("sliding_window"))
        + ")",
        f"mlp(d_ff, act = {_gated_act(c)}, fused_gate_up = true)",
    ),
    model=_llama_model,
)
