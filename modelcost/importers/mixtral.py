"""Configs of model_type `mixtral`, as transformers MixtralConfig: the family's row
(`FAMILY`) and what only it writes."""

from __future__ import annotations

from .family import (
    _MOE,
    MOE_PARAMS,
    Family,
    _decoder_layer,
    _gated_act,
    _llama_attention,
    _llama_model,
)

FAMILY = Family(
    model_types=("mixtral",),
    reference="transformers MixtralConfig",
    defaults={
        "vocab_size": 32000,
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
    },
    params=MOE_PARAMS,
    layer=lambda c: _decoder_layer(_llama_attention(c), _MOE.format(act=_gated_act(c))),
    model=_llama_model,
)
