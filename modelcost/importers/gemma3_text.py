"""Configs of model_type `gemma3_text`, as transformers Gemma3TextConfig (five local layers
to one global; RMSNorm on q and k): the family's row (`FAMILY`) and what only it writes."""

from __future__ import annotations

from .family import (
    GATED,
    GEMMA3_LAYER,
    LLAMA_PARAMS,
    REFUSE_LAYER_TYPES,
    Family,
    _head,
    _windowed_stack,
    key,
)

FAMILY = Family(
    model_types=("gemma3_text",),
    reference="transformers Gemma3TextConfig (five local layers to one global; RMSNorm on q and k)",
    defaults={
        "vocab_size": 262208,
        "hidden_size": 2304,
        "intermediate_size": 9216,
        "num_hidden_layers": 26,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "hidden_activation": "gelu_pytorch_tanh",
        "sliding_window": 4096,
        "sliding_window_pattern": 6,
        "final_logit_softcapping": None,
        "tie_word_embeddings": True,
    },
    params=(*LLAMA_PARAMS, ("sliding_window", key("sliding_window"))),
    layer=lambda c: GEMMA3_LAYER.format(act=GATED[c["hidden_activation"]]),
    layer_params="(window)",
    model=lambda c: f"embed(vocab)\n{_windowed_stack(c, 6)}\nrmsnorm\n{_head(c)}",
    refuse=(
        *REFUSE_LAYER_TYPES,
        (
            "final_logit_softcapping",
            lambda c: bool(c["final_logit_softcapping"]),
            "a soft-capped head with Gemma 3's layers",
        ),
    ),
)
