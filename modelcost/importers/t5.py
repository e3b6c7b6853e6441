"""Configs of model_type `t5`, as transformers T5Config (an encoder and a decoder sharing
one embedding; relative position biases): the family's row (`FAMILY`) and what only it
writes."""

from __future__ import annotations

from .family import Config, Family, _head, key

T5_FFN = {"relu": "relu", "gelu": "gelu", "gated-gelu": "geglu", "gated-silu": "swiglu"}


def _t5_ffn(c: Config) -> str:
    """T5's feed-forward: `relu` (T5), `gated-gelu` (T5 v1.1, Flan-T5: wi_0, wi_1 with
    gelu_new), `gated-silu`."""
    return f"mlp(d_ff, act = {T5_FFN[c['feed_forward_proj']]})"


T5_ATTENTION = "attention(heads, head_dim = head_dim, rope = false{causal})"


def _t5_blocks(c: Config) -> str:
    ffn = _t5_ffn(c)
    encoder = T5_ATTENTION.format(causal=", causal = false")
    decoder = T5_ATTENTION.format(causal="")
    return (
        f"block @layer_encoder {{\nrmsnorm\n{encoder}\nresidual\nrmsnorm\n{ffn}\nresidual\n}}"
        f"\n\nblock @layer_decoder {{\nrmsnorm\n{decoder}\nresidual\nrmsnorm\n"
        f"cross_attention(heads, head_dim = head_dim)\nresidual\nrmsnorm\n{ffn}\nresidual\n}}"
    )


def _t5_model(c: Config) -> str:
    return (
        "stream encoder(length = source_tokens) {\nembed(vocab)\nrel_pos_bias(heads, buckets)"
        "\nrepeat layers {\n@layer_encoder\n}\nrmsnorm\n}\n"
        "embed(vocab, tied = true)\nrel_pos_bias(heads, buckets)\n"
        f"repeat decoder_layers {{\n@layer_decoder\n}}\nrmsnorm\n{_head(c)}"
    )


FAMILY = Family(
    model_types=("t5",),
    reference="transformers T5Config (an encoder and a decoder sharing one embedding; "
    "relative position biases)",
    defaults={
        "vocab_size": 32128,
        "d_model": 512,
        "d_kv": 64,
        "d_ff": 2048,
        "num_layers": 6,
        "num_decoder_layers": None,
        "num_heads": 8,
        "relative_attention_num_buckets": 32,
        "feed_forward_proj": "relu",
        "tie_word_embeddings": True,
    },
    params=(
        ("vocab", key("vocab_size")),
        ("d_model", key("d_model")),
        ("layers", key("num_layers")),
        ("decoder_layers", lambda c: c["num_decoder_layers"] or c["num_layers"]),
        ("heads", key("num_heads")),
        ("head_dim", key("d_kv")),
        ("d_ff", key("d_ff")),
        ("buckets", key("relative_attention_num_buckets")),
        # the source length is the workload's; n_positions, where a config keeps
        # it, is the length the checkpoint was trained at
        ("source_tokens", lambda c: c.get("n_positions") or 512),
    ),
    layer=None,
    blocks=_t5_blocks,
    model=_t5_model,
    refuse=(
        (
            "feed_forward_proj",
            lambda c: c["feed_forward_proj"] not in T5_FFN,
            "this feed-forward kind",
        ),
        ("is_decoder", lambda c: bool(c.get("is_decoder")), "a decoder-only T5"),
    ),
)
