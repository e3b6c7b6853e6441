"""Configs of model_type `qwen2`, as transformers Qwen2Config (q, k and v projections carry
a bias): the family's row (`FAMILY`) and what only it writes."""

from __future__ import annotations

from .family import LLAMA_PARAMS, Family, _decoder_layer, _llama_attention, _llama_model, _mlp

FAMILY = Family(
    model_types=("qwen2",),
    reference="transformers Qwen2Config (q, k and v projections carry a bias)",
    defaults={
        "vocab_size": 151936,
        "hidden_size": 4096,
        "intermediate_size": 22016,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "use_sliding_window": False,
    },
    params=LLAMA_PARAMS,
    layer=lambda c: _decoder_layer(_llama_attention(c, qkv_bias=True), _mlp(c)),
    model=_llama_model,
)
