"""Configs of model_type `gpt2`, as transformers GPT2Config: the family's row (`FAMILY`)
and what only it writes."""

from __future__ import annotations

from .family import PLAIN, STACK, Family, _head, key

FAMILY = Family(
    model_types=("gpt2",),
    reference="transformers GPT2Config",
    defaults={
        "vocab_size": 50257,
        "n_positions": 1024,
        "n_embd": 768,
        "n_layer": 12,
        "n_head": 12,
        "n_inner": None,
        "activation_function": "gelu_new",
        "tie_word_embeddings": True,
    },
    params=(
        ("vocab", key("vocab_size")),
        ("positions", key("n_positions")),
        ("d_model", key("n_embd")),
        ("layers", key("n_layer")),
        ("heads", key("n_head")),
        ("d_ff", lambda c: c["n_inner"] or 4 * c["n_embd"]),
    ),
    layer=lambda c: (
        "layernorm\nattention(heads, qkv_bias = true, out_bias = true, fused_qkv = true, "
        "rope = false)\nresidual\nlayernorm\n"
        f"mlp(d_ff, act = {PLAIN[c['activation_function']]}, bias = true)\nresidual"
    ),
    model=lambda c: f"embed(vocab)\npos_embed(positions)\n{STACK}\nlayernorm\n{_head(c)}",
)
