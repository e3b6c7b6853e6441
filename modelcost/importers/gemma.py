"""Configs of model_type `gemma`, as transformers GemmaConfig: the family's row (`FAMILY`)
and what only it writes."""

from __future__ import annotations

from .family import LLAMA_PARAMS, Family, _decoder_layer, _llama_attention, _llama_model, _mlp

FAMILY = Family(
    model_types=("gemma",),
    reference="transformers GemmaConfig",
    defaults={
        "vocab_size": 256000,
        "hidden_size": 3072,
        "intermediate_size": 24576,
        "num_hidden_layers": 28,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "head_dim": 256,
        "hidden_act": "gelu_pytorch_tanh",
        "tie_word_embeddings": True,
    },
    params=LLAMA_PARAMS,
    layer=lambda c: _decoder_layer(_llama_attention(c), _mlp(c)),
    model=_llama_model,
)
