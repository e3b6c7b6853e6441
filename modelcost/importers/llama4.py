"""Configs of model_type `llama4`, as transformers Llama4Config (text_config over
Llama4TextConfig's defaults, vision_config over Llama4VisionConfig's); one 336-px tile
per image: the family's row (`FAMILY`) and what only it writes."""

from __future__ import annotations

from .family import Config, _flatten, _tower_family, key
from .llama4_text import FAMILY as LLAMA4_TEXT

LLAMA4_VISION_DEFAULTS: Config = {  # transformers Llama4VisionConfig
    "hidden_size": 768,
    "hidden_act": "gelu",
    "num_hidden_layers": 34,
    "num_attention_heads": 16,
    "num_channels": 3,
    "intermediate_size": 5632,
    "vision_output_dim": 7680,
    "image_size": 448,
    "patch_size": 14,
    "vision_feature_layer": -1,
    "pixel_shuffle_ratio": 0.5,
    "projector_input_dim": 4096,
    "projector_output_dim": 4096,
    "multi_modal_projector_bias": False,
}


def _llama4_prepare(c: Config) -> Config:
    return _flatten(c, LLAMA4_TEXT, "llama4_text", LLAMA4_VISION_DEFAULTS, "llama4_vision_model")


def _one_over(ratio: object) -> int | None:
    """n when `ratio` is 1/n for a whole n ≥ 1 (Llama 4's pixel shuffle ratio 0.5: 2)."""
    if isinstance(ratio, bool) or not isinstance(ratio, int | float) or ratio <= 0:
        return None
    n = round(1 / ratio)
    return n if n >= 1 and n * ratio == 1 else None


def _shuffle(c: Config) -> int:
    """Llama 4's pixel shuffle ratio as the side of the square of tokens merged."""
    n = _one_over(c["vision_config.pixel_shuffle_ratio"])
    if n is None:  # refused before the parameters are read
        raise ValueError("a pixel shuffle ratio that is not 1/n")
    return n


def _llama4_model(c: Config) -> str:
    """Llama 4's tower: an unfolded patch projection without bias, a class token and
    positions, LayerNorms before and after 34 layers (2-D RoPE), the class token dropped,
    the pixel shuffle, a two-layer GELU MLP without biases, and the projector."""
    return (
        "stream image(length = patches + 1, joins = patches / shuffle ** 2) {\n"
        "patch_embed(patch, image, channels = channels, bias = false, dim = vision_width)\n"
        "pos_embed(patches + 1)\nlayernorm\nrepeat vision_layers {\n@layer_vision\n}\n"
        "layernorm\nkeep(patches)\npixel_shuffle(shuffle)\n"
        "linear(projector_in, bias = false, act = gelu)\n"
        "linear(projector_out, bias = false, act = gelu)\nlinear(d_model, bias = false)\n}\n"
        + LLAMA4_TEXT.model(c)
    )


FAMILY = _tower_family(
    "llama4",
    LLAMA4_TEXT,
    "Llama4Config (text_config over Llama4TextConfig's defaults, vision_config over "
    "Llama4VisionConfig's); one 336-px tile per image",
    _llama4_prepare,
    (
        ("shuffle", _shuffle),
        ("projector_in", key("vision_config.projector_input_dim")),
        ("projector_out", key("vision_config.projector_output_dim")),
    ),
    True,
    _llama4_model,
    (
        (
            "vision_config",
            lambda c: c["vision_config.model_type"] != "llama4_vision_model",
            "a vision tower other than Llama 4's",
        ),
        (
            "vision_config.vision_feature_layer",
            lambda c: c["vision_config.vision_feature_layer"] != -1,
            "features from a tower layer other than the last",
        ),
        (
            "vision_config.pixel_shuffle_ratio",
            lambda c: _one_over(c["vision_config.pixel_shuffle_ratio"]) is None,
            "a pixel shuffle ratio other than 1/n",
        ),
        (
            "vision_config.vision_output_dim",
            lambda c: (
                c["vision_config.vision_output_dim"] != c["vision_config.projector_output_dim"]
            ),
            "a projector whose input is not the adapter's output",
        ),
        (
            "vision_config.intermediate_size",
            lambda c: (
                c["vision_config.hidden_size"] * _shuffle(c) ** 2
                != c["vision_config.intermediate_size"]
            ),
            "an adapter whose input is not the pixel-shuffled width",
        ),
        (
            "vision_config.multi_modal_projector_bias",
            lambda c: bool(c["vision_config.multi_modal_projector_bias"]),
            "projector biases",
        ),
    ),
    {"tie_word_embeddings": False},
)
