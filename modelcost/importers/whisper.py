"""Configs of model_type `whisper`, as transformers WhisperConfig (its defaults are Whisper
tiny's): the family's row (`FAMILY`) and what only it writes."""

from __future__ import annotations

from .family import PLAIN, Config, Family, _head, key

WHISPER_ATTENTION = "qkv_bias = true, k_bias = false, out_bias = true"


def _whisper_blocks(c: Config) -> str:
    act = PLAIN[c["activation_function"]]
    return (
        "block @layer_encoder {\nlayernorm\n"
        f"attention(encoder_heads, {WHISPER_ATTENTION}, rope = false, causal = false)\n"
        f"residual\nlayernorm\nmlp(encoder_d_ff, act = {act}, bias = true)\nresidual\n}}\n\n"
        f"block @layer_decoder {{\nlayernorm\nattention(heads, {WHISPER_ATTENTION}, rope = false)"
        f"\nresidual\nlayernorm\ncross_attention(heads, {WHISPER_ATTENTION})\nresidual\n"
        f"layernorm\nmlp(d_ff, act = {act}, bias = true)\nresidual\n}}"
    )


def _whisper_model(c: Config) -> str:
    return (
        "stream encoder(length = frames) {\nconv_stem(mels)\npos_embed(frames)\n"
        "repeat encoder_layers {\n@layer_encoder\n}\nlayernorm\n}\n"
        "embed(vocab)\npos_embed(positions)\nrepeat layers {\n@layer_decoder\n}\n"
        f"layernorm\n{_head(c)}"
    )


FAMILY = Family(
    model_types=("whisper",),
    reference="transformers WhisperConfig (its defaults are Whisper tiny's)",
    defaults={
        "vocab_size": 51865,
        "num_mel_bins": 80,
        "encoder_layers": 4,
        "encoder_attention_heads": 6,
        "decoder_layers": 4,
        "decoder_attention_heads": 6,
        "decoder_ffn_dim": 1536,
        "encoder_ffn_dim": 1536,
        "d_model": 384,
        "max_source_positions": 1500,
        "max_target_positions": 448,
        "activation_function": "gelu",
        "tie_word_embeddings": True,
    },
    params=(
        ("vocab", key("vocab_size")),
        ("d_model", key("d_model")),
        ("encoder_layers", key("encoder_layers")),
        ("encoder_heads", key("encoder_attention_heads")),
        ("encoder_d_ff", key("encoder_ffn_dim")),
        ("layers", key("decoder_layers")),
        ("heads", key("decoder_attention_heads")),
        ("d_ff", key("decoder_ffn_dim")),
        ("mels", key("num_mel_bins")),
        ("frames", key("max_source_positions")),
        ("positions", key("max_target_positions")),
    ),
    layer=None,
    blocks=_whisper_blocks,
    model=_whisper_model,
)
