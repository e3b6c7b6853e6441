"""Configs of model_type `deepseek_v2`, `deepseek_v3`, as DeepseekV2Config /
DeepseekV3Config (deepseek-ai's configuration_deepseek.py; the multi-token-prediction
modules, num_nextn_predict_layers, are an auxiliary stream): the family's row (`FAMILY`)
and what only it writes."""

from __future__ import annotations

from .family import Config, Family, Rule, _gated_act, _head, key


def _deepseek_blocks(c: Config) -> str:
    q = ", q_lora_rank = q_lora_rank" if c.get("q_lora_rank") else ""
    v3 = c.get("topk_method") == "noaux_tc"
    grouped = v3 or c.get("topk_method") == "group_limited_greedy"
    router = ", router = sigmoid" if c.get("scoring_func") == "sigmoid" else ""
    groups = ", groups = expert_groups, groups_kept = expert_groups_kept" if grouped else ""
    shared = (", shared_experts = shared_experts, shared_d_ff = expert_d_ff"
              if c.get("n_shared_experts") else "")  # fmt: skip
    act = _gated_act(c)
    return (
        "block @layer_attention {\nrmsnorm\nmla(heads, kv_lora_rank, qk_nope_head_dim, "
        f"qk_rope_head_dim, v_head_dim{q})\nresidual\n}}\n\n"
        f"block @layer_dense {{\n@layer_attention\nrmsnorm\nmlp(d_ff, act = {act})\n"
        "residual\n}\n\n"
        f"block @layer_moe {{\n@layer_attention\nrmsnorm\nmoe(experts, top_k, expert_d_ff"
        f"{shared}, act = {act}{router}{groups}"
        f"{', correction_bias = true' if v3 else ''})\nresidual\n}}"
    )


def _deepseek_model(c: Config) -> str:
    dense = "repeat dense_layers {\n@layer_dense\n}\n" if c["first_k_dense_replace"] else ""
    return (f"embed(vocab)\n{dense}repeat layers - dense_layers {{\n@layer_moe\n}}\n"
            f"rmsnorm\n{_head(c)}{_mtp(c)}")  # fmt: skip


def _mtp(c: Config) -> str:
    """DeepSeek-V3's multi-token-prediction modules (num_nextn_predict_layers): each its
    own embedding copy, projection, MoE layer, norm and head, as the checkpoint holds."""
    depth = c.get("num_nextn_predict_layers") or 0
    if not depth:
        return ""
    module = "embed(vocab)\nmtp_proj\n@layer_moe\nrmsnorm\nlm_head(vocab)"
    body = module if depth == 1 else f"repeat {depth} {{\n{module}\n}}"
    return f"\nstream mtp(auxiliary = true) {{\n{body}\n}}"


DEEPSEEK_PARAMS: tuple[tuple[str, Rule], ...] = (
    ("vocab", key("vocab_size")),
    ("d_model", key("hidden_size")),
    ("layers", key("num_hidden_layers")),
    ("dense_layers", key("first_k_dense_replace")),
    ("heads", key("num_attention_heads")),
    ("q_lora_rank", lambda c: c["q_lora_rank"] or 0),
    ("kv_lora_rank", key("kv_lora_rank")),
    ("qk_nope_head_dim", key("qk_nope_head_dim")),
    ("qk_rope_head_dim", key("qk_rope_head_dim")),
    ("v_head_dim", key("v_head_dim")),
    ("d_ff", key("intermediate_size")),
    ("expert_d_ff", key("moe_intermediate_size")),
    ("experts", key("n_routed_experts")),
    ("shared_experts", lambda c: c["n_shared_experts"] or 0),
    ("top_k", key("num_experts_per_tok")),
    ("expert_groups", lambda c: c.get("n_group") or 1),
    ("expert_groups_kept", lambda c: c.get("topk_group") or 1),
)


FAMILY = Family(
    model_types=("deepseek_v2", "deepseek_v3"),
    reference="DeepseekV2Config / DeepseekV3Config (deepseek-ai's configuration_deepseek"
    ".py; the multi-token-prediction modules, num_nextn_predict_layers, are an "
    "auxiliary stream)",
    defaults={
        "vocab_size": 129280,
        "hidden_size": 7168,
        "intermediate_size": 18432,
        "moe_intermediate_size": 2048,
        "num_hidden_layers": 61,
        "num_attention_heads": 128,
        "n_shared_experts": 1,
        "n_routed_experts": 256,
        "num_experts_per_tok": 8,
        "first_k_dense_replace": 3,
        "moe_layer_freq": 1,
        "q_lora_rank": 1536,
        "kv_lora_rank": 512,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
        "hidden_act": "silu",
        "scoring_func": "softmax",
        "topk_method": "greedy",
        "tie_word_embeddings": False,
    },
    params=DEEPSEEK_PARAMS,
    layer=None,
    blocks=_deepseek_blocks,
    model=_deepseek_model,
    refuse=(
        ("moe_layer_freq", lambda c: c["moe_layer_freq"] != 1, "MoE on every n-th layer only"),
    ),
)
