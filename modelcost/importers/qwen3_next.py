"""Configs of model_type `qwen3_next`, as transformers Qwen3NextConfig (Gated DeltaNet and
gated attention layers, a sigmoid-gated shared expert); the multi-token-prediction
module is left out: the family's row (`FAMILY`) and what only it writes."""

from __future__ import annotations

from .family import (
    GLOBAL,
    LOCAL,
    REFUSE_QWEN_MOE,
    Config,
    Family,
    _gated_act,
    _head,
    _not_per_layer,
    _windowed_stack,
    head_dim,
    key,
    kv_heads,
)


def _qwen3_next_blocks(c: Config) -> str:
    return (
        "block @layer_linear {\nrmsnorm\n"
        "gated_deltanet(k_heads, v_heads, head_k_dim, head_v_dim, d_conv = "
        f"{c['linear_conv_kernel_dim']})\nresidual\nrmsnorm\n@layer_moe\nresidual\n}}\n\n"
        "block @layer_full {\nrmsnorm\nattention(heads, kv_heads, head_dim, qk_norm = true, "
        "gate = true)\nresidual\nrmsnorm\n@layer_moe\nresidual\n}\n\n"
        "block @layer_moe {\nmoe(experts, top_k, expert_d_ff, shared_experts = 1, "
        f"shared_d_ff = shared_d_ff, act = {_gated_act(c)}, shared_gate = true)\n}}"
    )


def _qwen3_next_stack(c: Config) -> str:
    every = c["full_attention_interval"]
    types = c.get("layer_types") or [
        "full_attention" if (i + 1) % every == 0 else "linear_attention"
        for i in range(c["num_hidden_layers"])
    ]
    field = "layer_types" if c.get("layer_types") else "full_attention_interval"
    stack = _windowed_stack({**c, "layer_types": [
        GLOBAL if t == "full_attention" else LOCAL for t in types]}, field=field)  # fmt: skip
    return stack.replace("@layer(window = sliding_window)", "@layer_linear").replace(
        "@layer(window = 0)", "@layer_full"
    )


FAMILY = Family(
    model_types=("qwen3_next",),
    reference="transformers Qwen3NextConfig (Gated DeltaNet and gated attention layers, "
    "a sigmoid-gated shared expert); the multi-token-prediction module is left out",
    defaults={
        "vocab_size": 151936,
        "hidden_size": 2048,
        "num_hidden_layers": 48,
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "head_dim": 256,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 32,
        "linear_key_head_dim": 128,
        "linear_value_head_dim": 128,
        "linear_conv_kernel_dim": 4,
        "full_attention_interval": 4,
        "num_experts": 512,
        "num_experts_per_tok": 10,
        "moe_intermediate_size": 512,
        "shared_expert_intermediate_size": 512,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "hidden_act": "silu",
        "tie_word_embeddings": False,
    },
    params=(
        ("vocab", key("vocab_size")),
        ("d_model", key("hidden_size")),
        ("layers", key("num_hidden_layers")),
        ("heads", key("num_attention_heads")),
        ("kv_heads", kv_heads),
        ("head_dim", head_dim),
        ("k_heads", key("linear_num_key_heads")),
        ("v_heads", key("linear_num_value_heads")),
        ("head_k_dim", key("linear_key_head_dim")),
        ("head_v_dim", key("linear_value_head_dim")),
        ("experts", key("num_experts")),
        ("top_k", key("num_experts_per_tok")),
        ("expert_d_ff", key("moe_intermediate_size")),
        ("shared_d_ff", key("shared_expert_intermediate_size")),
    ),
    layer=None,
    blocks=_qwen3_next_blocks,
    model=lambda c: f"embed(vocab)\n{_qwen3_next_stack(c)}\nrmsnorm\n{_head(c)}",
    refuse=(
        *REFUSE_QWEN_MOE,
        (
            "layer_types",
            lambda c: _not_per_layer(c, "layer_types", ("linear_attention", GLOBAL)),
            "layer types other than linear and full attention, or not one per layer,",
        ),
    ),
)
