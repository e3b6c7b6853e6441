"""Configs of model_type `gemma3`, as transformers Gemma3Config (text_config over
Gemma3TextConfig's defaults, vision_config over SiglipVisionConfig's): the family's row
(`FAMILY`) and what only it writes."""

from __future__ import annotations

import math

from .family import Config, _flatten, _tower_family, key
from .gemma3_text import FAMILY as GEMMA3_TEXT

SIGLIP_VISION_DEFAULTS: Config = {  # transformers SiglipVisionConfig
    "hidden_size": 768,
    "intermediate_size": 3072,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "num_channels": 3,
    "image_size": 224,
    "patch_size": 16,
    "hidden_act": "gelu_pytorch_tanh",
    "vision_use_head": True,
}


def _gemma3_model(c: Config) -> str:
    """SigLIP over the image's patches (no class token), its post-LayerNorm, average
    pooling to mm_tokens_per_image, Gemma's RMSNorm and a projection without bias."""
    return (
        "stream image(length = patches, joins = image_tokens) {\n"
        "patch_embed(patch, image, channels = channels, cls_token = false, dim = vision_width)"
        "\npos_embed(patches)\nrepeat vision_layers {\n@layer_vision\n}\nlayernorm\n"
        "pool(pool_kernel)\nrmsnorm\nlinear(d_model, bias = false)\n}\n" + GEMMA3_TEXT.model(c)
    )


def _gemma3_prepare(c: Config) -> Config:
    return _flatten(c, GEMMA3_TEXT, "gemma3_text", SIGLIP_VISION_DEFAULTS, "siglip_vision_model")


def _pool(c: Config) -> int | None:
    """Gemma 3's average-pool kernel: the patch grid's side over the image tokens' (None
    when mm_tokens_per_image is not a square grid that tiles the patches evenly)."""
    side = c["vision_config.image_size"] // c["vision_config.patch_size"]
    tokens = c["mm_tokens_per_image"]
    if not isinstance(tokens, int) or tokens <= 0 or math.isqrt(tokens) ** 2 != tokens:
        return None
    kernel, rest = divmod(side, math.isqrt(tokens))
    return kernel if kernel and not rest else None


def _pool_kernel(c: Config) -> int:
    kernel = _pool(c)
    if kernel is None:  # refused before the parameters are read
        raise ValueError("mm_tokens_per_image does not tile the patch grid")
    return kernel


FAMILY = _tower_family(
    "gemma3",
    GEMMA3_TEXT,
    "Gemma3Config (text_config over Gemma3TextConfig's defaults, vision_config over "
    "SiglipVisionConfig's)",
    _gemma3_prepare,
    (("image_tokens", key("mm_tokens_per_image")), ("pool_kernel", _pool_kernel)),
    False,
    _gemma3_model,
    (
        (
            "vision_config",
            lambda c: c["vision_config.model_type"] != "siglip_vision_model",
            "a vision tower other than SigLIP's",
        ),
        (
            "vision_config.vision_use_head",
            lambda c: bool(c["vision_config.vision_use_head"]),
            "SigLIP's attention-pooling head",
        ),
        (
            "mm_tokens_per_image",
            lambda c: _pool(c) is None,
            "image tokens that do not pool the patch grid evenly",
        ),
    ),
    {"mm_tokens_per_image": 256},
)
