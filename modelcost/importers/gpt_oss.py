"""Configs of model_type `gpt_oss`, as transformers GptOssConfig (sliding and full layers
alternate; attention sinks; MXFP4 experts when quantization_config says so): the
family's row (`FAMILY`) and what only it writes."""

from __future__ import annotations

from .checks import _quant_method
from .family import (
    MOE_PARAMS,
    REFUSE_LAYER_TYPES,
    Config,
    Family,
    _decoder_layer,
    _head,
    _windowed_stack,
    key,
)


def _gpt_oss_layer(c: Config) -> str:
    recipe = ", recipe = mxfp4_weights" if _quant_method(c) == "mxfp4" else ""
    return _decoder_layer(
        "attention(heads, kv_heads, head_dim, qkv_bias = true, out_bias = true, "
        "sinks = true, window = window)",
        f"moe(experts, top_k, expert_d_ff, act = swiglu, bias = true, router_bias = true{recipe})",
    )


FAMILY = Family(
    model_types=("gpt_oss",),
    reference="transformers GptOssConfig (sliding and full layers alternate; attention "
    "sinks; MXFP4 experts when quantization_config says so)",
    defaults={
        "vocab_size": 201088,
        "hidden_size": 2880,
        "intermediate_size": 2880,
        "num_hidden_layers": 36,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "num_local_experts": 128,
        "num_experts_per_tok": 4,
        "sliding_window": 128,
        "tie_word_embeddings": False,
    },
    params=(*MOE_PARAMS, ("sliding_window", key("sliding_window"))),
    layer=_gpt_oss_layer,
    quantization=True,
    layer_params="(window)",
    model=lambda c: f"embed(vocab)\n{_windowed_stack(c)}\nrmsnorm\n{_head(c)}",
    refuse=REFUSE_LAYER_TYPES,
)
