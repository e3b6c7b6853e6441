"""Configs of model_type `bert`, as transformers BertConfig (BertModel: the encoder and its
pooler): the family's row (`FAMILY`) and what only it writes."""

from __future__ import annotations

from .family import PLAIN, STACK, Family, key

FAMILY = Family(
    model_types=("bert",),
    reference="transformers BertConfig (BertModel: the encoder and its pooler)",
    defaults={
        "vocab_size": 30522,
        "hidden_size": 768,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "intermediate_size": 3072,
        "hidden_act": "gelu",
        "max_position_embeddings": 512,
        "type_vocab_size": 2,
        "position_embedding_type": "absolute",
    },
    params=(
        ("vocab", key("vocab_size")),
        ("positions", key("max_position_embeddings")),
        ("types", key("type_vocab_size")),
        ("d_model", key("hidden_size")),
        ("layers", key("num_hidden_layers")),
        ("heads", key("num_attention_heads")),
        ("d_ff", key("intermediate_size")),
    ),
    layer=lambda c: (
        "attention(heads, qkv_bias = true, out_bias = true, rope = false, causal = false)"
        f"\nresidual\nlayernorm\nmlp(d_ff, act = {PLAIN[c['hidden_act']]}, bias = true)"
        "\nresidual\nlayernorm"
    ),
    model=lambda _c: (
        f"embed(vocab)\npos_embed(positions)\ntype_embed(types)\nlayernorm\n{STACK}\npooler"
    ),
    refuse=(
        (
            "position_embedding_type",
            lambda c: c["position_embedding_type"] != "absolute",
            "relative position embeddings",
        ),
    ),
)
