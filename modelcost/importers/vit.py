"""Configs of model_type `vit`, as transformers ViTConfig (a class token; a classifier over
id2label, as ViTForImageClassification): the family's row (`FAMILY`) and what only it
writes."""

from __future__ import annotations

from .family import PLAIN, STACK, Family, key

FAMILY = Family(
    model_types=("vit",),
    reference="transformers ViTConfig (a class token; a classifier over id2label, "
    "as ViTForImageClassification)",
    defaults={
        "hidden_size": 768,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "intermediate_size": 3072,
        "hidden_act": "gelu",
        "image_size": 224,
        "patch_size": 16,
        "num_channels": 3,
        "qkv_bias": True,
    },
    params=(
        ("image", key("image_size")),
        ("patch", key("patch_size")),
        ("d_model", key("hidden_size")),
        ("layers", key("num_hidden_layers")),
        ("heads", key("num_attention_heads")),
        ("d_ff", key("intermediate_size")),
        ("classes", lambda c: len(c["id2label"])),
    ),
    layer=lambda c: (
        "layernorm\nattention(heads, qkv_bias = "
        f"{'true' if c['qkv_bias'] else 'false'}, out_bias = true, rope = false, "
        f"causal = false)\nresidual\nlayernorm\nmlp(d_ff, act = "
        f"{PLAIN[c['hidden_act']]}, bias = true)\nresidual"
    ),
    model=lambda c: (
        f"patch_embed(patch, image, channels = {c['num_channels']})\n"
        f"pos_embed((image / patch) ** 2 + 1)\n{STACK}\nlayernorm\nclassifier(classes)"
    ),
    refuse=(
        (
            "id2label",
            lambda c: "id2label" not in c,
            "a ViT without a classification head (no id2label)",
        ),
    ),
)
