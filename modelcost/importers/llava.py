"""Configs of model_type `llava`, as transformers LlavaConfig (text_config over
LlamaConfig's defaults, vision_config over CLIPVisionConfig's): the family's row
(`FAMILY`) and what only it writes."""

from __future__ import annotations

from .family import (
    LLAMA_PARAMS,
    PLAIN,
    Config,
    Family,
    _decoder_layer,
    _flatten,
    _llama_attention,
    _llama_model,
    _mlp,
    _patches,
    key,
)
from .llama import FAMILY as LLAMA

CLIP_VISION_DEFAULTS: Config = {  # transformers CLIPVisionConfig
    "hidden_size": 768,
    "intermediate_size": 3072,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "num_channels": 3,
    "image_size": 224,
    "patch_size": 32,
    "hidden_act": "quick_gelu",
}


LLAVA_TEXT_TYPES = ("llama", "mistral")  # language models whose family the importer reads


def _llava_prepare(c: Config) -> Config:
    return _flatten(c, LLAMA, "llama", CLIP_VISION_DEFAULTS, "clip_vision_model")


def _vision_layers(c: Config) -> int:
    """The tower layers whose output the projector reads: vision_feature_layer counts
    hidden states (the embeddings are state 0; −1 is the last layer's output)."""
    n, k = c["vision_config.num_hidden_layers"], c["vision_feature_layer"]
    return n + 1 + k if k < 0 else k


def _llava_blocks(c: Config) -> str:
    act = PLAIN[c["vision_config.hidden_act"]]
    vision = (
        "block @layer_vision {\nlayernorm\nattention(vision_heads, qkv_bias = true, "
        "out_bias = true, rope = false, causal = false)\nresidual\nlayernorm\n"
        f"mlp(vision_d_ff, act = {act}, bias = true)\nresidual\n}}"
    )
    text = _decoder_layer(_llama_attention(c), _mlp(c))
    return f"{vision}\n\nblock @layer {{\n{text}\n}}"


def _llava_model(c: Config) -> str:
    default = c["vision_feature_select_strategy"] == "default"  # drops the class token
    joins, keep = ("patches", "keep(patches)\n") if default else ("patches + 1", "")
    act = PLAIN[c["projector_hidden_act"]]
    bias = "" if c.get("multimodal_projector_bias", True) else ", bias = false"
    return (
        f"stream image(length = patches + 1, joins = {joins}) {{\n"
        "patch_embed(patch, image, channels = channels, bias = false, dim = vision_width)\n"
        "pos_embed(patches + 1)\nlayernorm\nrepeat vision_layers {\n@layer_vision\n}\n"
        f"{keep}linear(d_model, act = {act}{bias})\nlinear(d_model{bias})\n}}\n"
        f"{_llama_model(c)}"
    )


FAMILY = Family(
    model_types=("llava",),
    reference="transformers LlavaConfig (text_config over LlamaConfig's defaults, "
    "vision_config over CLIPVisionConfig's)",
    defaults={
        "projector_hidden_act": "gelu",
        "vision_feature_layer": -2,
        "vision_feature_select_strategy": "default",
        "tie_word_embeddings": False,
    },
    prepare=_llava_prepare,
    params=(
        *LLAMA_PARAMS,
        ("image", key("vision_config.image_size")),
        ("patch", key("vision_config.patch_size")),
        ("channels", key("vision_config.num_channels")),
        ("patches", _patches),
        ("vision_width", key("vision_config.hidden_size")),
        ("vision_layers", _vision_layers),
        ("vision_heads", key("vision_config.num_attention_heads")),
        ("vision_d_ff", key("vision_config.intermediate_size")),
    ),
    layer=None,
    blocks=_llava_blocks,
    model=_llava_model,
    refuse=(
        (
            "text_config",
            lambda c: c["text_config.model_type"] not in LLAVA_TEXT_TYPES,
            "a language model outside the llama family",
        ),
        (
            "vision_config",
            lambda c: c["vision_config.model_type"] != "clip_vision_model",
            "a vision tower other than CLIP's",
        ),
        (
            "vision_feature_layer",
            lambda c: not isinstance(c["vision_feature_layer"], int),
            "features from several tower layers",
        ),
        (
            "vision_feature_layer",
            lambda c: not 0 < _vision_layers(c) <= c["vision_config.num_hidden_layers"],
            "a feature layer outside the tower",
        ),
        (
            "vision_feature_select_strategy",
            lambda c: c["vision_feature_select_strategy"] not in ("default", "full"),
            "this feature selection",
        ),
    ),
)
