"""Configs of model_type `llama`, `mistral`, as transformers LlamaConfig / MistralConfig:
the family's row (`FAMILY`) and what only it writes."""

from __future__ import annotations

from .family import LLAMA_PARAMS, Family, _decoder_layer, _llama_attention, _llama_model, _mlp

FAMILY = Family(
    model_types=("llama", "mistral"),
    reference="transformers LlamaConfig / MistralConfig",
    defaults={
        "vocab_size": 32000,
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "attention_bias": False,
        "mlp_bias": False,
    },
    params=LLAMA_PARAMS,
    layer=lambda c: _decoder_layer(_llama_attention(c), _mlp(c)),
    model=_llama_model,
)
