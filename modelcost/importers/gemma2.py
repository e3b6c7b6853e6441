"""Configs of model_type `gemma2`, as transformers Gemma2Config (local and global layers
alternate): the family's row (`FAMILY`) and what only it writes."""

from __future__ import annotations

from .family import (
    GATED,
    GEMMA2_LAYER,
    LLAMA_PARAMS,
    REFUSE_LAYER_TYPES,
    Family,
    _windowed_stack,
    key,
)

FAMILY = Family(
    model_types=("gemma2",),
    reference="transformers Gemma2Config (local and global layers alternate)",
    defaults={
        "vocab_size": 256000,
        "hidden_size": 3072,
        "intermediate_size": 24576,
        "num_hidden_layers": 28,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "hidden_activation": "gelu_pytorch_tanh",
        "sliding_window": 4096,
        "attn_logit_softcapping": 50.0,
        "final_logit_softcapping": 30.0,
        "tie_word_embeddings": True,
    },
    params=(
        *LLAMA_PARAMS,
        ("sliding_window", key("sliding_window")),
        ("attn_softcap", lambda c: float(c["attn_logit_softcapping"] or 0)),
        ("final_softcap", lambda c: float(c["final_logit_softcapping"] or 0)),
    ),
    layer=lambda c: GEMMA2_LAYER.format(act=GATED[c["hidden_activation"]]),
    layer_params="(window)",
    model=lambda c: (
        f"embed(vocab)\n{_windowed_stack(c)}\nrmsnorm\n"
        "lm_head(vocab"
        + (", tied = true" if c.get("tie_word_embeddings") else "")
        + ", softcap = final_softcap)"
    ),
    refuse=REFUSE_LAYER_TYPES,
)
