"""Configs of model_type `qwen2_moe`, as transformers Qwen2MoeConfig (q, k, v biases; a
shared expert behind a sigmoid gate): the family's row (`FAMILY`) and what only it
writes."""

from __future__ import annotations

from .family import (
    MOE_PARAMS,
    REFUSE_QWEN_MOE,
    Family,
    _decoder_layer,
    _gated_act,
    _llama_attention,
    _llama_model,
    key,
)

FAMILY = Family(
    model_types=("qwen2_moe",),
    reference="transformers Qwen2MoeConfig (q, k, v biases; a shared expert behind a sigmoid gate)",
    defaults={
        "vocab_size": 151936,
        "hidden_size": 2048,
        "intermediate_size": 5632,
        "num_hidden_layers": 24,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "hidden_act": "silu",
        "decoder_sparse_step": 1,
        "moe_intermediate_size": 1408,
        "shared_expert_intermediate_size": 5632,
        "num_experts_per_tok": 4,
        "num_experts": 60,
        "mlp_only_layers": [],
        "tie_word_embeddings": False,
        "use_sliding_window": False,
    },
    params=(*MOE_PARAMS, ("shared_d_ff", key("shared_expert_intermediate_size"))),
    layer=lambda c: _decoder_layer(
        _llama_attention(c, qkv_bias=True),
        f"moe(experts, top_k, expert_d_ff, shared_experts = 1, shared_d_ff = shared_d_ff, "
        f"act = {_gated_act(c)}, shared_gate = true)",
    ),
    model=_llama_model,
    refuse=REFUSE_QWEN_MOE,
)
