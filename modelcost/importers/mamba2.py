"""Configs of model_type `mamba2`, as transformers Mamba2Config: the family's row
(`FAMILY`) and what only it writes."""

from __future__ import annotations

from .family import STACK, Family, _head, key

FAMILY = Family(
    model_types=("mamba2",),
    reference="transformers Mamba2Config",
    defaults={
        "vocab_size": 32768,
        "hidden_size": 4096,
        "num_hidden_layers": 64,
        "state_size": 128,
        "expand": 2,
        "conv_kernel": 4,
        "head_dim": 64,
        "n_groups": 8,
        "chunk_size": 256,
        "tie_word_embeddings": False,
    },
    params=(
        ("vocab", key("vocab_size")),
        ("d_model", key("hidden_size")),
        ("layers", key("num_hidden_layers")),
    ),
    layer=lambda c: (
        f"rmsnorm\nmamba2(d_state = {c['state_size']}, d_conv = {c['conv_kernel']}, "
        f"expand = {c['expand']}, head_dim = {c['head_dim']}, groups = {c['n_groups']}, "
        f"chunk = {c['chunk_size']}"
        + (f", heads = {c['num_heads']}" if "num_heads" in c else "")
        + ")\nresidual"
    ),
    model=lambda c: f"embed(vocab)\n{STACK}\nrmsnorm\n{_head(c)}",
)
