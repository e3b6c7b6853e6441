"""Configs of model_type `qwen3_moe`, as transformers Qwen3MoeConfig: the family's row
(`FAMILY`) and what only it writes."""

from __future__ import annotations

from .family import (
    _MOE,
    MOE_PARAMS,
    REFUSE_QWEN_MOE,
    Family,
    _decoder_layer,
    _gated_act,
    _llama_attention,
    _llama_model,
)

FAMILY = Family(
    model_types=("qwen3_moe",),
    reference="transformers Qwen3MoeConfig",
    defaults={
        "vocab_size": 151936,
        "hidden_size": 2048,
        "intermediate_size": 6144,
        "num_hidden_layers": 24,
        "num_attention_heads": 32,
        "num_key_value_heads": 4,
        "head_dim": 128,
        "moe_intermediate_size": 768,
        "num_experts": 128,
        "num_experts_per_tok": 8,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "attention_bias": False,
        "use_sliding_window": False,
    },
    params=MOE_PARAMS,
    layer=lambda c: _decoder_layer(
        _llama_attention(c, qk_norm=True), _MOE.format(act=_gated_act(c))
    ),
    model=_llama_model,
    refuse=REFUSE_QWEN_MOE,
)
