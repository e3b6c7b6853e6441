"""Configs of model_type `qwen3`, as transformers Qwen3Config (RMSNorm on q and k per
head): the family's row (`FAMILY`) and what only it writes."""

from __future__ import annotations

from .family import LLAMA_PARAMS, Family, _decoder_layer, _llama_attention, _llama_model, _mlp

FAMILY = Family(
    model_types=("qwen3",),
    reference="transformers Qwen3Config (RMSNorm on q and k per head)",
    defaults={
        "vocab_size": 151936,
        "hidden_size": 4096,
        "intermediate_size": 22016,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "head_dim": 128,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "attention_bias": False,
        "use_sliding_window": False,
    },
    params=LLAMA_PARAMS,
    layer=lambda c: _decoder_layer(_llama_attention(c, qk_norm=True), _mlp(c)),
    model=_llama_model,
)
