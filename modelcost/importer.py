"""Hugging Face `config.json` → a readable `.model`: one table per model family.

A family says which `model_type`s it reads, the defaults its reference config class
defines for fields a config may omit (transformers' `LlamaConfig`, `MixtralConfig`, ...:
one place per family), the model parameters it takes from the config (each a config
key, or a small rule over the config), the fields whose values it cannot represent,
and the statements of its layer and of the model around it. The output cites every
config field it used and goes through `fmt`, so it is the canonical text.

Offline only: no hub access, no transformers.
"""

from __future__ import annotations

import json
import math
import re
import textwrap
from collections.abc import Callable
from typing import Any

from .bounds import MAX_NESTING, MAX_NUMBER_CHARS, MAX_TOKENS
from .errors import SpecError
from .fmt import format_source
from .record import Record
from .resolve import MAX_DIM, MAX_REPEAT, parse_spec

Config = dict[str, Any]
Rule = Callable[[Config], Any]


def key(name: str) -> Rule:
    return lambda c: c[name]


def _set(c: Config, name: str) -> Any:
    """The field's value, or None when the config omits it or gives null (a value of 0
    is not 'unset': the read refuses it where a field must be positive)."""
    return c.get(name)


def head_dim(c: Config) -> int:
    """`head_dim` when the config sets it, else hidden_size / num_attention_heads."""
    value = _set(c, "head_dim")
    return value if value is not None else c["hidden_size"] // c["num_attention_heads"]


def kv_heads(c: Config) -> int:
    """`num_key_value_heads`, else (null or absent) multi-head: num_attention_heads."""
    value = _set(c, "num_key_value_heads")
    return value if value is not None else c["num_attention_heads"]


class Family(Record, frozen=True):
    """How one family's configs become a `.model`."""

    model_types: tuple[str, ...]
    reference: str  # the config class whose defaults `defaults` copies
    defaults: dict[str, Any]
    params: tuple[tuple[str, Rule], ...]  # model parameter ← rule over the config
    layer: Callable[[Config], str] | None  # the layer block's statements
    model: Callable[[Config], str]  # the model's statements; `@layer` names the block
    refuse: tuple[tuple[str, Callable[[Config], bool], str], ...] = ()  # (field, test, why)
    layer_params: str = ""  # the block's parameters, e.g. `(window)`
    quantization: bool = False  # the family reads quantization_config itself
    # several blocks, headers included (`block @layer_dense {...}`), for families whose
    # layers differ (DeepSeek's dense and MoE layers); instead of `layer`
    blocks: Callable[[Config], str] | None = None
    # flattens a composite config (LLaVA's text_config and vision_config, each over its
    # own class's defaults) into one mapping the rules read; applied after `defaults`
    prepare: Callable[[Config], Config] | None = None

    def block_text(self, c: Config) -> str:
        if self.blocks is not None:
            return self.blocks(c)
        assert self.layer is not None  # a family has one or the other
        return f"block @layer{self.layer_params} {{\n{self.layer(c)}\n}}"


def _flags(**flags: bool | int | None) -> str:
    """`, name = value` for every flag set (a window of 0 or None is unset)."""
    out = []
    for name, value in flags.items():
        if value is True:
            out.append(f", {name} = true")
        elif value not in (None, False, 0):
            out.append(f", {name} = {value}")
    return "".join(out)


def _decoder_layer(mixer: str, ffn: str) -> str:
    return f"rmsnorm\n{mixer}\nresidual\nrmsnorm\n{ffn}\nresidual"


def _llama_attention(c: Config, *, qkv_bias: bool = False, qk_norm: bool = False) -> str:
    bias = bool(c.get("attention_bias"))
    window = c.get("sliding_window") if c.get("use_sliding_window", True) else None
    return "attention(heads, kv_heads, head_dim" + _flags(
        qkv_bias=qkv_bias or bias, out_bias=bias, qk_norm=qk_norm, rope=True, window=window
    ) + ")"  # fmt: skip


def _head(c: Config) -> str:
    tied = bool(c.get("tie_word_embeddings"))
    return "lm_head(vocab" + (", tied = true" if tied else "") + ")"


STACK = "repeat layers {\n@layer\n}"


def _llama_model(c: Config) -> str:
    return f"embed(vocab)\n{STACK}\nrmsnorm\n{_head(c)}"


# fields whose values are names (mapped through a table, never written as they are)
NAMED = frozenset({"hidden_act", "hidden_activation", "activation_function",
                   "position_embedding_type", "scoring_func", "topk_method",
                   "feed_forward_proj", "projector_hidden_act", "vision_config.hidden_act",
                   "vision_feature_select_strategy", "torch_dtype", "text_config.model_type",
                   "vision_config.model_type"})  # fmt: skip

GATED = {"silu": "swiglu", "swish": "swiglu", "gelu": "geglu", "gelu_pytorch_tanh": "geglu"}
PLAIN = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu",
         "relu": "relu", "silu": "silu", "quick_gelu": "quick_gelu"}  # fmt: skip


def _gated_act(c: Config) -> str:
    return GATED[c["hidden_act"]]


LLAMA_PARAMS: tuple[tuple[str, Rule], ...] = (
    ("vocab", key("vocab_size")),
    ("d_model", key("hidden_size")),
    ("layers", key("num_hidden_layers")),
    ("heads", key("num_attention_heads")),
    ("kv_heads", kv_heads),
    ("head_dim", head_dim),
    ("d_ff", key("intermediate_size")),
)


def _either(c: Config, first: str, second: str) -> Any:
    """`first` when the config sets it (not null), else `second`."""
    value = _set(c, first)
    return value if value is not None else c[second]


MOE_PARAMS: tuple[tuple[str, Rule], ...] = (
    *LLAMA_PARAMS[:-1],
    ("experts", lambda c: _either(c, "num_local_experts", "num_experts")),
    ("top_k", key("num_experts_per_tok")),
    ("expert_d_ff", lambda c: _either(c, "moe_intermediate_size", "intermediate_size")),
)

# Qwen's MoE configs can place dense layers among the MoE ones: not written yet
REFUSE_QWEN_MOE: tuple[tuple[str, Callable[[Config], bool], str], ...] = (
    ("decoder_sparse_step", lambda c: c["decoder_sparse_step"] != 1,
     "MoE on every n-th layer only"),
    ("mlp_only_layers", lambda c: bool(c["mlp_only_layers"]), "dense MLP layers at chosen indices"),
)  # fmt: skip

_DENSE_MLP = "mlp(d_ff, act = {act}{bias})"
_MOE = "moe(experts, top_k, expert_d_ff, act = {act})"


def _mlp(c: Config) -> str:
    return _DENSE_MLP.format(act=_gated_act(c), bias=_flags(bias=bool(c.get("mlp_bias"))))


FAMILIES: tuple[Family, ...] = (
    Family(
        model_types=("llama", "mistral"),
        reference="transformers LlamaConfig / MistralConfig",
        defaults={
            "vocab_size": 32000,
            "hidden_size": 4096,
            "intermediate_size": 11008,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "hidden_act": "silu",
            "tie_word_embeddings": False,
            "attention_bias": False,
            "mlp_bias": False,
        },
        params=LLAMA_PARAMS,
        layer=lambda c: _decoder_layer(_llama_attention(c), _mlp(c)),
        model=_llama_model,
    ),
    Family(
        model_types=("qwen2",),
        reference="transformers Qwen2Config (q, k and v projections carry a bias)",
        defaults={
            "vocab_size": 151936,
            "hidden_size": 4096,
            "intermediate_size": 22016,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "hidden_act": "silu",
            "tie_word_embeddings": False,
            "use_sliding_window": False,
        },
        params=LLAMA_PARAMS,
        layer=lambda c: _decoder_layer(_llama_attention(c, qkv_bias=True), _mlp(c)),
        model=_llama_model,
    ),
    Family(
        model_types=("qwen3",),
        reference="transformers Qwen3Config (RMSNorm on q and k per head)",
        defaults={
            "vocab_size": 151936,
            "hidden_size": 4096,
            "intermediate_size": 22016,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "head_dim": 128,
            "hidden_act": "silu",
            "tie_word_embeddings": False,
            "attention_bias": False,
            "use_sliding_window": False,
        },
        params=LLAMA_PARAMS,
        layer=lambda c: _decoder_layer(_llama_attention(c, qk_norm=True), _mlp(c)),
        model=_llama_model,
    ),
    Family(
        model_types=("mixtral",),
        reference="transformers MixtralConfig",
        defaults={
            "vocab_size": 32000,
            "hidden_size": 4096,
            "intermediate_size": 14336,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "num_local_experts": 8,
            "num_experts_per_tok": 2,
            "hidden_act": "silu",
            "tie_word_embeddings": False,
        },
        params=MOE_PARAMS,
        layer=lambda c: _decoder_layer(_llama_attention(c), _MOE.format(act=_gated_act(c))),
        model=_llama_model,
    ),
    Family(
        model_types=("qwen3_moe",),
        reference="transformers Qwen3MoeConfig",
        defaults={
            "vocab_size": 151936,
            "hidden_size": 2048,
            "intermediate_size": 6144,
            "num_hidden_layers": 24,
            "num_attention_heads": 32,
            "num_key_value_heads": 4,
            "head_dim": 128,
            "moe_intermediate_size": 768,
            "num_experts": 128,
            "num_experts_per_tok": 8,
            "decoder_sparse_step": 1,
            "mlp_only_layers": [],
            "hidden_act": "silu",
            "tie_word_embeddings": False,
            "attention_bias": False,
            "use_sliding_window": False,
        },
        params=MOE_PARAMS,
        layer=lambda c: _decoder_layer(
            _llama_attention(c, qk_norm=True), _MOE.format(act=_gated_act(c))
        ),
        model=_llama_model,
        refuse=REFUSE_QWEN_MOE,
    ),
    Family(
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
    ),
)


LOCAL, GLOBAL = "sliding_attention", "full_attention"


def layer_types(c: Config, every: int = 2) -> list[str]:
    """Each layer's attention: `layer_types` when the config lists them, else every
    `every`-th layer global (`sliding_window_pattern`: Gemma 3's 6), the rest local."""
    types = c.get("layer_types")
    if types is not None:
        return list(types)
    every = c.get("sliding_window_pattern") or every
    return [GLOBAL if i % every == every - 1 else LOCAL for i in range(c["num_hidden_layers"])]


def _unknown_layer_type(c: Config) -> bool:
    types = layer_types(c)
    return len(types) != c["num_hidden_layers"] or any(t not in (LOCAL, GLOBAL) for t in types)


def _not_per_layer(c: Config, field: str, allowed: tuple[object, ...]) -> bool:
    """Whether a per-layer list the config sets (not null or empty: then the family's
    interval applies) has other than one allowed entry per layer."""
    values = c.get(field) or []
    return bool(values) and (
        len(values) != c["num_hidden_layers"] or any(v not in allowed for v in values)
    )


# The most layer calls (one pattern and the layers after its last repeat) an import
# writes: each call is at most 11 tokens (`@m_layer(rope = true, chunk = attention_chunk)`),
# so this many stay well within the language's MAX_TOKENS with the rest of the model
MAX_PATTERN = MAX_TOKENS // 16


def _period(types: list[str]) -> int:
    """The shortest p with types[i] == types[i % p] for every i: n less the longest
    proper border (the prefix function, linear in n; a search over p is quadratic)."""
    border = [0] * len(types)
    for i in range(1, len(types)):
        k = border[i - 1]
        while k and types[i] != types[k]:
            k = border[k - 1]
        border[i] = k + (types[i] == types[k])
    return len(types) - border[-1]


def _windowed_stack(c: Config, every: int = 2, field: str | None = None) -> str:
    """The layers as the shortest repeating pattern of local and global layers (each a
    call of the block with its window), then the layers left over. `field`: the config
    field the pattern comes from (named when it cannot be written)."""
    types = layer_types(c, every)
    if field is None:
        given = [f for f in ("layer_types", "sliding_window_pattern") if _set(c, f) is not None]
        field = given[0] if given else "num_hidden_layers"
    n = len(types)
    if not n:
        raise _Bad(field, f"`{field}` gives no layers")
    period = _period(types)
    repeats, tail = divmod(n, period)
    if period + tail > MAX_PATTERN:
        raise _Bad(field, f"`{field}`: its {n:,} layers repeat no pattern of at most "
                   f"{MAX_PATTERN:,} layers (the shortest is {period:,})")  # fmt: skip

    def call(t: str) -> str:
        return f"@layer(window = {'sliding_window' if t == LOCAL else 0})"

    count = "layers" if not tail else f"(layers - {tail})"
    count += f" / {period}" if period > 1 else ""
    body = "\n".join(call(t) for t in types[:period])
    stack = f"repeat {count} {{\n{body}\n}}"
    return "\n".join([stack, *(call(t) for t in types[repeats * period :])])


REFUSE_LAYER_TYPES = (
    (
        "layer_types",
        _unknown_layer_type,
        "layer types other than sliding and full attention, or not one per layer",
    ),
)


GEMMA2_LAYER = (
    "rmsnorm\nattention(heads, kv_heads, head_dim, window = window, softcap = attn_softcap)\n"
    "rmsnorm\nresidual\nrmsnorm\nmlp(d_ff, act = {act})\nrmsnorm\nresidual"
)


GEMMA3_LAYER = (
    "rmsnorm\nattention(heads, kv_heads, head_dim, qk_norm = true, window = window)\n"
    "rmsnorm\nresidual\nrmsnorm\nmlp(d_ff, act = {act})\nrmsnorm\nresidual"
)


def _gpt_oss_layer(c: Config) -> str:
    recipe = ", recipe = mxfp4_weights" if _quant_method(c) == "mxfp4" else ""
    return _decoder_layer(
        "attention(heads, kv_heads, head_dim, qkv_bias = true, out_bias = true, "
        "sinks = true, window = window)",
        f"moe(experts, top_k, expert_d_ff, act = swiglu, bias = true, router_bias = true{recipe})",
    )


FAMILIES += (
    Family(
        model_types=("gemma",),
        reference="transformers GemmaConfig",
        defaults={
            "vocab_size": 256000,
            "hidden_size": 3072,
            "intermediate_size": 24576,
            "num_hidden_layers": 28,
            "num_attention_heads": 16,
            "num_key_value_heads": 16,
            "head_dim": 256,
            "hidden_act": "gelu_pytorch_tanh",
            "tie_word_embeddings": True,
        },
        params=LLAMA_PARAMS,
        layer=lambda c: _decoder_layer(_llama_attention(c), _mlp(c)),
        model=_llama_model,
    ),
    Family(
        model_types=("gemma2",),
        reference="transformers Gemma2Config (local and global layers alternate)",
        defaults={
            "vocab_size": 256000,
            "hidden_size": 3072,
            "intermediate_size": 24576,
            "num_hidden_layers": 28,
            "num_attention_heads": 8,
            "num_key_value_heads": 4,
            "head_dim": 256,
            "hidden_activation": "gelu_pytorch_tanh",
            "sliding_window": 4096,
            "attn_logit_softcapping": 50.0,
            "final_logit_softcapping": 30.0,
            "tie_word_embeddings": True,
        },
        params=(
            *LLAMA_PARAMS,
            ("sliding_window", key("sliding_window")),
            ("attn_softcap", lambda c: float(c["attn_logit_softcapping"] or 0)),
            ("final_softcap", lambda c: float(c["final_logit_softcapping"] or 0)),
        ),
        layer=lambda c: GEMMA2_LAYER.format(act=GATED[c["hidden_activation"]]),
        layer_params="(window)",
        model=lambda c: (
            f"embed(vocab)\n{_windowed_stack(c)}\nrmsnorm\n"
            "lm_head(vocab"
            + (", tied = true" if c.get("tie_word_embeddings") else "")
            + ", softcap = final_softcap)"
        ),
        refuse=REFUSE_LAYER_TYPES,
    ),
    Family(
        model_types=("gpt_oss",),
        reference="transformers GptOssConfig (sliding and full layers alternate; attention "
        "sinks; MXFP4 experts when quantization_config says so)",
        defaults={
            "vocab_size": 201088,
            "hidden_size": 2880,
            "intermediate_size": 2880,
            "num_hidden_layers": 36,
            "num_attention_heads": 64,
            "num_key_value_heads": 8,
            "head_dim": 64,
            "num_local_experts": 128,
            "num_experts_per_tok": 4,
            "sliding_window": 128,
            "tie_word_embeddings": False,
        },
        params=(*MOE_PARAMS, ("sliding_window", key("sliding_window"))),
        layer=_gpt_oss_layer,
        quantization=True,
        layer_params="(window)",
        model=lambda c: f"embed(vocab)\n{_windowed_stack(c)}\nrmsnorm\n{_head(c)}",
        refuse=REFUSE_LAYER_TYPES,
    ),
)


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

MAMBA_SSM = "mamba_ssm"  # state-spaces' own format: no model_type, an `ssm_cfg`


def _ssm(c: Config, name: str, default: int) -> int:
    """A Mamba-2 layer's setting from `ssm_cfg` (read as any count field is)."""
    cfg = c.get("ssm_cfg") or {}
    return _checked_value(f"ssm_cfg.{name}", cfg[name]) if name in cfg else default


FAMILIES += (
    Family(
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
    ),
    Family(
        model_types=(MAMBA_SSM,),
        reference="mamba_ssm's MambaConfig and Mamba2 layer (state-spaces/mamba)",
        defaults={
            "d_intermediate": 0,
            "attn_layer_idx": [],
            "pad_vocab_size_multiple": 8,
            "tie_embeddings": True,
        },
        params=(
            (
                "vocab",
                lambda c: (
                    -(-c["vocab_size"] // c["pad_vocab_size_multiple"])
                    * c["pad_vocab_size_multiple"]
                ),
            ),
            ("d_model", key("d_model")),
            ("layers", key("n_layer")),
        ),
        layer=lambda c: (
            f"rmsnorm\nmamba2(d_state = {_ssm(c, 'd_state', 128)}, d_conv = "
            f"{_ssm(c, 'd_conv', 4)}, expand = {_ssm(c, 'expand', 2)}, head_dim = "
            f"{_ssm(c, 'headdim', 64)}, groups = {_ssm(c, 'ngroups', 1)}, chunk = "
            f"{_ssm(c, 'chunk_size', 256)})\nresidual"
        ),
        model=lambda c: (
            f"embed(vocab)\n{STACK}\nrmsnorm\nlm_head(vocab"
            + (", tied = true" if c["tie_embeddings"] else "")
            + ")"
        ),
        refuse=(
            (
                "attn_layer_idx",
                lambda c: bool(c["attn_layer_idx"]),
                "attention layers among the Mamba-2 layers",
            ),
            ("d_intermediate", lambda c: bool(c["d_intermediate"]), "MLP layers"),
        ),
    ),
    Family(
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
    ),
)

FAMILIES += (
    Family(
        model_types=("phi3",),
        reference="transformers Phi3Config (one qkv_proj, one gate_up_proj)",
        defaults={
            "vocab_size": 32064,
            "hidden_size": 3072,
            "intermediate_size": 8192,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "hidden_act": "silu",
            "sliding_window": None,
            "tie_word_embeddings": False,
        },
        params=LLAMA_PARAMS,
        layer=lambda c: _decoder_layer(
            "attention(heads, kv_heads, head_dim, fused_qkv = true"
            + _flags(window=c.get("sliding_window"))
            + ")",
            f"mlp(d_ff, act = {_gated_act(c)}, fused_gate_up = true)",
        ),
        model=_llama_model,
    ),
    Family(
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
    ),
)

FAMILIES += (
    Family(
        model_types=("gemma3_text",),
        reference="transformers Gemma3TextConfig (five local layers to one global; "
        "RMSNorm on q and k)",
        defaults={
            "vocab_size": 262208,
            "hidden_size": 2304,
            "intermediate_size": 9216,
            "num_hidden_layers": 26,
            "num_attention_heads": 8,
            "num_key_value_heads": 4,
            "head_dim": 256,
            "hidden_activation": "gelu_pytorch_tanh",
            "sliding_window": 4096,
            "sliding_window_pattern": 6,
            "final_logit_softcapping": None,
            "tie_word_embeddings": True,
        },
        params=(*LLAMA_PARAMS, ("sliding_window", key("sliding_window"))),
        layer=lambda c: GEMMA3_LAYER.format(act=GATED[c["hidden_activation"]]),
        layer_params="(window)",
        model=lambda c: f"embed(vocab)\n{_windowed_stack(c, 6)}\nrmsnorm\n{_head(c)}",
        refuse=(
            *REFUSE_LAYER_TYPES,
            (
                "final_logit_softcapping",
                lambda c: bool(c["final_logit_softcapping"]),
                "a soft-capped head with Gemma 3's layers",
            ),
        ),
    ),
)

FAMILIES += (
    Family(
        model_types=("qwen2_moe",),
        reference="transformers Qwen2MoeConfig (q, k, v biases; a shared expert behind a "
        "sigmoid gate)",
        defaults={
            "vocab_size": 151936,
            "hidden_size": 2048,
            "intermediate_size": 5632,
            "num_hidden_layers": 24,
            "num_attention_heads": 16,
            "num_key_value_heads": 16,
            "hidden_act": "silu",
            "decoder_sparse_step": 1,
            "moe_intermediate_size": 1408,
            "shared_expert_intermediate_size": 5632,
            "num_experts_per_tok": 4,
            "num_experts": 60,
            "mlp_only_layers": [],
            "tie_word_embeddings": False,
            "use_sliding_window": False,
        },
        params=(*MOE_PARAMS, ("shared_d_ff", key("shared_expert_intermediate_size"))),
        layer=lambda c: _decoder_layer(
            _llama_attention(c, qkv_bias=True),
            f"moe(experts, top_k, expert_d_ff, shared_experts = 1, shared_d_ff = shared_d_ff, "
            f"act = {_gated_act(c)}, shared_gate = true)",
        ),
        model=_llama_model,
        refuse=REFUSE_QWEN_MOE,
    ),
)

FAMILIES += (
    Family(
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
    ),
)


def _llama4_stack(c: Config) -> str:
    """Layers by `no_rope_layers` (1: RoPE, chunked attention, L2 qk-norm; 0: global,
    no RoPE), as the shortest repeating pattern."""
    rope = c.get("no_rope_layers") or [
        int((i + 1) % c["no_rope_layer_interval"] != 0) for i in range(c["num_hidden_layers"])
    ]
    types = [LOCAL if r else GLOBAL for r in rope]
    field = "no_rope_layers" if c.get("no_rope_layers") else "no_rope_layer_interval"
    return (
        _windowed_stack({**c, "layer_types": types}, field=field)
        .replace("(window = sliding_window)", "(rope = true, chunk = attention_chunk)")
        .replace("(window = 0)", "(rope = false, chunk = 0)")
    )


FAMILIES += (
    Family(
        model_types=("llama4_text",),
        reference="transformers Llama4TextConfig (its defaults are Llama 4 Scout's)",
        defaults={
            "vocab_size": 202048,
            "hidden_size": 5120,
            "intermediate_size": 8192,
            "intermediate_size_mlp": 16384,
            "num_hidden_layers": 48,
            "num_attention_heads": 40,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "num_local_experts": 16,
            "num_experts_per_tok": 1,
            "interleave_moe_layer_step": 1,
            "attention_chunk_size": 8192,
            "no_rope_layer_interval": 4,
            "use_qk_norm": True,
            "hidden_act": "silu",
            "tie_word_embeddings": False,
        },
        params=(*MOE_PARAMS, ("attention_chunk", key("attention_chunk_size"))),
        layer=lambda c: _decoder_layer(
            "attention(heads, kv_heads, head_dim, rope = rope, chunk = chunk"
            + (", qk_l2_norm = rope" if c["use_qk_norm"] else "")
            + ")",
            f"moe(experts, top_k, expert_d_ff, shared_experts = 1, act = {_gated_act(c)}, "
            "router = sigmoid)",
        ),
        layer_params="(rope, chunk)",
        model=lambda c: f"embed(vocab)\n{_llama4_stack(c)}\nrmsnorm\n{_head(c)}",
        refuse=(
            (
                "interleave_moe_layer_step",
                lambda c: c["interleave_moe_layer_step"] != 1,
                "dense layers between the MoE ones (Maverick's)",
            ),
            (
                "no_rope_layers",
                lambda c: _not_per_layer(c, "no_rope_layers", (0, 1)),
                "entries other than 0 and 1, or not one per layer,",
            ),
        ),
    ),
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


FAMILIES += (
    Family(
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
    ),
)


# ---------------------------------------------------------------- several token streams


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


CLIP_VISION_DEFAULTS: Config = {  # transformers CLIPVisionConfig
    "hidden_size": 768,
    "intermediate_size": 3072,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "num_channels": 3,
    "image_size": 224,
    "patch_size": 32,
    "hidden_act": "quick_gelu",
}
LLAVA_TEXT_TYPES = ("llama", "mistral")  # language models whose family the importer reads


def _flatten(c: Config, text_type: str, vision_defaults: Config, vision_type: str) -> Config:
    """A composite config flattened: the language model's fields over its own family's
    defaults, the tower's as `vision_config.*` over its class's."""
    text = _checked_value("text_config", c.get("text_config")) or {}
    vision = _checked_value("vision_config", c.get("vision_config")) or {}
    flat = {**c, **BY_TYPE[text_type].defaults, **text}
    flat["text_config.model_type"] = text.get("model_type", text_type)
    flat.update({f"vision_config.{k}": v for k, v in {**vision_defaults, **vision}.items()})
    flat["vision_config.model_type"] = vision.get("model_type", vision_type)
    return flat


def _llava_prepare(c: Config) -> Config:
    return _flatten(c, "llama", CLIP_VISION_DEFAULTS, "clip_vision_model")


def _patches(c: Config) -> int:
    return (c["vision_config.image_size"] // c["vision_config.patch_size"]) ** 2


def _vision_layers(c: Config) -> int:
    """The tower layers whose output the projector reads: vision_feature_layer counts
    hidden states (the embeddings are state 0; −1 is the last layer's output)."""
    n, k = c["vision_config.num_hidden_layers"], c["vision_feature_layer"]
    return n + 1 + k if k < 0 else k


def _llava_blocks(c: Config) -> str:
    act = PLAIN[c["vision_config.hidden_act"]]
    vision = (
        "block @layer_vision {\nlayernorm\nattention(vision_heads, qkv_bias = true, "
        "out_bias = true, rope = false, causal = false)\nresidual\nlayernorm\n"
        f"mlp(vision_d_ff, act = {act}, bias = true)\nresidual\n}}"
    )
    text = _decoder_layer(_llama_attention(c), _mlp(c))
    return f"{vision}\n\nblock @layer {{\n{text}\n}}"


def _llava_model(c: Config) -> str:
    default = c["vision_feature_select_strategy"] == "default"  # drops the class token
    joins, keep = ("patches", "keep(patches)\n") if default else ("patches + 1", "")
    act = PLAIN[c["projector_hidden_act"]]
    bias = "" if c.get("multimodal_projector_bias", True) else ", bias = false"
    return (
        f"stream image(length = patches + 1, joins = {joins}) {{\n"
        "patch_embed(patch, image, channels = channels, bias = false, dim = vision_width)\n"
        "pos_embed(patches + 1)\nlayernorm\nrepeat vision_layers {\n@layer_vision\n}\n"
        f"{keep}linear(d_model, act = {act}{bias})\nlinear(d_model{bias})\n}}\n"
        f"{_llama_model(c)}"
    )


FAMILIES += (
    Family(
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
    ),
    Family(
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
    ),
    Family(
        model_types=("llava",),
        reference="transformers LlavaConfig (text_config over LlamaConfig's defaults, "
        "vision_config over CLIPVisionConfig's)",
        defaults={
            "projector_hidden_act": "gelu",
            "vision_feature_layer": -2,
            "vision_feature_select_strategy": "default",
            "tie_word_embeddings": False,
        },
        prepare=_llava_prepare,
        params=(
            *LLAMA_PARAMS,
            ("image", key("vision_config.image_size")),
            ("patch", key("vision_config.patch_size")),
            ("channels", key("vision_config.num_channels")),
            ("patches", _patches),
            ("vision_width", key("vision_config.hidden_size")),
            ("vision_layers", _vision_layers),
            ("vision_heads", key("vision_config.num_attention_heads")),
            ("vision_d_ff", key("vision_config.intermediate_size")),
        ),
        layer=None,
        blocks=_llava_blocks,
        model=_llava_model,
        refuse=(
            (
                "text_config",
                lambda c: c["text_config.model_type"] not in LLAVA_TEXT_TYPES,
                "a language model outside the llama family",
            ),
            (
                "vision_config",
                lambda c: c["vision_config.model_type"] != "clip_vision_model",
                "a vision tower other than CLIP's",
            ),
            (
                "vision_feature_layer",
                lambda c: not isinstance(c["vision_feature_layer"], int),
                "features from several tower layers",
            ),
            (
                "vision_feature_layer",
                lambda c: not 0 < _vision_layers(c) <= c["vision_config.num_hidden_layers"],
                "a feature layer outside the tower",
            ),
            (
                "vision_feature_select_strategy",
                lambda c: c["vision_feature_select_strategy"] not in ("default", "full"),
                "this feature selection",
            ),
        ),
    ),
)

BY_TYPE: dict[str, Family] = {t: f for f in FAMILIES for t in f.model_types}


# ---------------------------------------------------------------- Gemma 3 and Llama 4


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
VISION_PARAMS: tuple[tuple[str, Rule], ...] = (
    ("image", key("vision_config.image_size")),
    ("patch", key("vision_config.patch_size")),
    ("channels", key("vision_config.num_channels")),
    ("patches", _patches),
    ("vision_width", key("vision_config.hidden_size")),
    ("vision_layers", key("vision_config.num_hidden_layers")),
    ("vision_heads", key("vision_config.num_attention_heads")),
    ("vision_d_ff", key("vision_config.intermediate_size")),
)


def _vision_layer(c: Config, rope: bool) -> str:
    act = PLAIN[c["vision_config.hidden_act"]]
    return (
        "block @layer_vision {\nlayernorm\nattention(vision_heads, qkv_bias = true, "
        f"out_bias = true, rope = {str(rope).lower()}, causal = false)\nresidual\nlayernorm\n"
        f"mlp(vision_d_ff, act = {act}, bias = true)\nresidual\n}}"
    )


def _gemma3_model(c: Config) -> str:
    """SigLIP over the image's patches (no class token), its post-LayerNorm, average
    pooling to mm_tokens_per_image, Gemma's RMSNorm and a projection without bias."""
    return (
        "stream image(length = patches, joins = image_tokens) {\n"
        "patch_embed(patch, image, channels = channels, cls_token = false, dim = vision_width)"
        "\npos_embed(patches)\nrepeat vision_layers {\n@layer_vision\n}\nlayernorm\n"
        "pool(pool_kernel)\nrmsnorm\nlinear(d_model, bias = false)\n}\n"
        + BY_TYPE["gemma3_text"].model(c)
    )


def _gemma3_prepare(c: Config) -> Config:
    return _flatten(c, "gemma3_text", SIGLIP_VISION_DEFAULTS, "siglip_vision_model")


def _llama4_prepare(c: Config) -> Config:
    return _flatten(c, "llama4_text", LLAMA4_VISION_DEFAULTS, "llama4_vision_model")


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
        + BY_TYPE["llama4_text"].model(c)
    )


def _tower_family(
    model_type: str,
    text_type: str,
    tower: str,
    prepare: Callable[[Config], Config],
    params: tuple[tuple[str, Rule], ...],
    rope: bool,
    model: Callable[[Config], str],
    refuse: tuple[tuple[str, Callable[[Config], bool], str], ...],
    defaults: Config,
) -> Family:
    """A vision tower before a language model of a family the importer reads: that
    family's parameters, layer blocks and refusals, and the tower's own."""
    text = BY_TYPE[text_type]
    return Family(
        model_types=(model_type,),
        reference=f"transformers {tower}",
        defaults=defaults,
        prepare=prepare,
        params=(*text.params, *VISION_PARAMS, *params),
        layer=None,
        blocks=lambda c: f"{_vision_layer(c, rope)}\n\n{text.block_text(c)}",
        model=model,
        refuse=(*text.refuse, *refuse),
    )


FAMILIES += (
    _tower_family(
        "gemma3",
        "gemma3_text",
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
    ),
    _tower_family(
        "llama4",
        "llama4_text",
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
    ),
)

BY_TYPE = {t: f for f in FAMILIES for t in f.model_types}


# ---- nemotron-nas: DeciLM's per-block configs (Llama-3.1-Nemotron-51B, -Ultra-253B)

# the sink and sparse-attention fields of a block: refused unless off (null or false)
NAS_OFF = ("num_sink_tokens", "sparsify", "window_length", "unshifted_sink",
           "use_prefill_window_in_sink_attention")  # fmt: skip
# every field a block's part may have (DeciLM's AttentionConfig and FFNConfig): any other
# that is set is refused rather than left out of the model
NAS_FIELDS = {
    "attention": ("no_op", "replace_with_linear", "n_heads_in_group", *NAS_OFF),
    "ffn": ("no_op", "replace_with_linear", "ffn_mult", *NAS_OFF),
}


def nas_intermediate_size(ffn_mult: float, hidden: int) -> int:
    """DeciLM's `_ffn_mult_to_intermediate_size` (NVIDIA's modeling_decilm.py, as copied
    by vLLM, SGLang and TensorRT-LLM): int(2 · ffn_mult · hidden / 3), rounded up to a
    multiple of 256."""
    size = int(2 * ffn_mult * hidden / 3)
    return size if size % 256 == 0 else size + 256 - size % 256


def _nas_flag(part: dict, field: str, name: str) -> bool:
    value = part.get(name, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise _Bad(f"{field}.{name}", f"`{field}.{name}` must be true or false, got {_show(value)}")
    return value


def _nas_part(block: Any, i: int, part: str) -> dict:
    field = f"block_configs.{i}"
    if not isinstance(block, dict):  # (the error points at block_configs)
        raise _Bad("block_configs", f"`{field}` must be an object, got {_show(block)}")
    value = block.get(part)
    if not isinstance(value, dict):
        raise _Bad(f"{field}.{part}" if part in block else field,
                   f"`{field}.{part}` must be an object, got {_show(value)}")  # fmt: skip
    for name in NAS_OFF:
        if value.get(name) not in (None, False):
            where = f"{field}.{part}.{name}"
            raise _Bad(where, f"`{where}` = {_show(value[name])}: sink or sparse attention "
                       "cannot be written yet")  # fmt: skip
    for name, setting in value.items():
        if name not in NAS_FIELDS[part] and setting not in (None, False):
            where = f"{field}.{part}.{name}"
            raise _Bad(where, f"`{where}` = {_show(setting)} is a field the importer cannot "
                       f"represent (it reads {', '.join(NAS_FIELDS[part])})")  # fmt: skip
    for name, setting in block.items():
        if name not in NAS_FIELDS and setting is not None:
            where = f"{field}.{name}"
            raise _Bad(where, f"`{where}` = {_show(setting)} is a field the importer cannot "
                       "represent (a block has `attention` and `ffn`)")  # fmt: skip
    return value


def _nas_replaced(part: dict, field: str, linear: str) -> str | None:
    """A block's part left out (`no_op`: no call) or replaced by a d × d linear layer
    (`replace_with_linear`: `linear`), else None: the part as its own kind."""
    if _nas_flag(part, field, "no_op"):
        return ""
    if _nas_flag(part, field, "replace_with_linear"):
        return linear
    return None


def _nas_attention(block: Any, i: int, heads: int) -> str:
    """One block's attention as a call: `@layer_attn(kv)`, `@layer_attn_linear` or none."""
    field = f"block_configs.{i}.attention"
    a = _nas_part(block, i, "attention")
    replaced = _nas_replaced(a, field, "@layer_attn_linear")
    if replaced is not None:
        return replaced
    group = a.get("n_heads_in_group")
    where = f"{field}.n_heads_in_group"
    if isinstance(group, bool) or not isinstance(group, int) or group < 1:
        raise _Bad(where if "n_heads_in_group" in a else field,
                   f"`{where}` must be a positive whole number, got {_show(group)}")  # fmt: skip
    if heads % group:
        raise _Bad(where, f"`{where}` = {group} does not divide num_attention_heads = {heads}")
    return f"@layer_attn({heads // group})"


def _nas_ffn(block: Any, i: int, hidden: int) -> str:
    """One block's FFN as a call: `@layer_ffn(d_ff)`, `@layer_ffn_linear` or none."""
    field = f"block_configs.{i}.ffn"
    f = _nas_part(block, i, "ffn")
    replaced = _nas_replaced(f, field, "@layer_ffn_linear")
    if replaced is not None:
        return replaced
    mult = f.get("ffn_mult")
    where = f"{field}.ffn_mult"
    if (isinstance(mult, bool) or not isinstance(mult, int | float) or not math.isfinite(mult)
            or mult <= 0):  # fmt: skip
        raise _Bad(where if "ffn_mult" in f else field,
                   f"`{where}` must be a positive number, got {_show(mult)}")  # fmt: skip
    if not 2 * mult * hidden / 3 <= MAX_DIM:  # (an overflow to infinity included)
        raise _Bad(where, f"`{where}` = {_show(mult)}: sizes are bounded by {MAX_DIM:,}")
    size = nas_intermediate_size(mult, hidden)
    if size < 1:
        raise _Bad(where, f"`{where}` = {_show(mult)} gives an FFN 0 wide "
                   f"(int(2 · {_show(mult)} · {hidden} / 3))")  # fmt: skip
    return f"@layer_ffn({size})"


def _nas_blocks(c: Config) -> str:
    bias = _flags(bias=bool(c["mlp_bias"]))
    qkv = _flags(qkv_bias=bool(c["attention_bias"]), out_bias=bool(c["attention_bias"]))
    return (
        "block @layer_attn(kv) {\nrmsnorm\n"
        f"attention(heads, kv, head_dim{qkv}, rope = true)\nresidual\n}}\n\n"
        "block @layer_attn_linear {\nrmsnorm\nlinear(d_model, bias = false)\nresidual\n}\n\n"
        f"block @layer_ffn(d_ff) {{\nrmsnorm\nmlp(d_ff, act = {_gated_act(c)}{bias})\n"
        "residual\n}\n\n"
        "block @layer_ffn_linear {\nrmsnorm\nlinear(d_model, bias = false)\nresidual\n}"
    )


def _nas_model(c: Config) -> str:
    """The layers in order, each its attention and FFN calls; a run of equal layers as
    one `repeat` (at most MAX_PATTERN runs: the language's token bound)."""
    blocks = c["block_configs"]
    if not isinstance(blocks, list):
        raise _Bad(
            "block_configs", f"`block_configs` must be a list of blocks, got {_show(blocks)}"
        )
    layers = c["num_hidden_layers"]
    if len(blocks) != layers:
        raise _Bad("block_configs", f"`block_configs` has {len(blocks):,} entries for "
                   f"num_hidden_layers = {layers:,}")  # fmt: skip
    heads, hidden = c["num_attention_heads"], c["hidden_size"]
    runs: list[list[Any]] = []  # [calls, count]
    for i, block in enumerate(blocks):
        calls = "\n".join(x for x in (_nas_attention(block, i, heads),
                                      _nas_ffn(block, i, hidden)) if x)  # fmt: skip
        if runs and runs[-1][0] == calls:
            runs[-1][1] += 1
        else:
            runs.append([calls, 1])
    if len(runs) > MAX_PATTERN:
        raise _Bad("block_configs", f"`block_configs`: its {layers:,} layers form "
                   f"{len(runs):,} runs of equal layers; an import writes at most "
                   f"{MAX_PATTERN:,}")  # fmt: skip
    body = [calls if n == 1 else f"repeat {n} {{\n{calls}\n}}" for calls, n in runs if calls]
    return "\n".join(["embed(vocab)", *body, "rmsnorm", _head(c)])


FAMILIES += (
    Family(
        model_types=("nemotron-nas",),
        reference="DeciLMConfig (NVIDIA's configuration_decilm.py; per-block attention "
        "and FFN from block_configs, FFN width by modeling_decilm.py's "
        "_ffn_mult_to_intermediate_size)",
        defaults={
            "vocab_size": 32000,
            "hidden_size": 4096,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "hidden_act": "silu",
            "tie_word_embeddings": False,
            "attention_bias": False,
            "mlp_bias": False,
        },
        params=(
            ("vocab", key("vocab_size")),
            ("d_model", key("hidden_size")),
            ("heads", key("num_attention_heads")),
            ("head_dim", head_dim),
        ),
        layer=None,
        blocks=_nas_blocks,
        model=_nas_model,
    ),
)
BY_TYPE = {t: f for f in FAMILIES for t in f.model_types}


def import_config(text: str, filename: str, name: str | None = None) -> str:
    """The canonical `.model` text of a `config.json` (`name`: the model's, else the
    file's stem). Unknown families, unrepresentable fields and values of the wrong kind
    are SpecErrors that point at the field in the config (its line and column when the
    file has it); the text returned compiles."""
    _scan(text, filename)  # before json: nesting, number sizes, non-finite numbers
    try:
        config = json.loads(text)
    except json.JSONDecodeError as err:
        raise _at(text, filename, err.lineno, err.colno, f"not JSON: {err.msg}") from None
    if not isinstance(config, dict):
        raise SpecError("a config.json holds one JSON object", filename=filename)
    if "schema_version" in config and "reports" in config:
        raise SpecError(
            f"a saved modelcost report (schema_version {_show(config['schema_version'])}), "
            "not a Hugging Face config.json",
            filename=filename,
            hint="`modelcost diff A.json B.json` compares two saved reports; the other "
            "commands read a .model file (or a config.json)",
        )
    model_type = config.get("model_type") or (MAMBA_SSM if "ssm_cfg" in config else None)
    family = BY_TYPE.get(model_type) if isinstance(model_type, str) else None
    if family is None:
        supported = ", ".join(sorted(BY_TYPE))
        raise _field(text, filename, "model_type",
                     f"model_type {_show(model_type)} cannot be imported yet",
                     f"families the importer reads: {supported}")  # fmt: skip
    c = {**family.defaults, **config}
    try:
        if family.prepare is not None:
            c = family.prepare(c)
        return _write(family, c, _Where(text, filename, family.reference), name, config)
    except _Bad as bad:
        raise _field(text, filename, bad.field, bad.message, family.reference) from None


class _Bad(Exception):
    """A config value the importer refuses, by its field; turned into a SpecError that
    points at the field in the config's text."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field, self.message = field, message


class _Where(Record, frozen=True):
    """The config's text and file, for errors that point into it."""

    text: str
    filename: str
    hint: str


def _write(family: Family, c: Config, where: _Where, name: str | None, config: Config) -> str:
    """The `.model` text: refusals first, then the parameters, blocks and model, each
    read through a `_Checked` mapping (a value of the wrong kind is refused as it is
    read, before any rule uses it)."""
    for field, test, why in family.refuse:
        if _run(test, _Checked(c), where, f"the check of `{field}`"):
            raise _Bad(field, f"`{field}` = {_show(c.get(field))}: {why} cannot be written yet")
    checked = _Checked(c)
    values: list[tuple[str, Any]] = []
    reads: dict[str, list[str]] = {}  # parameter → the fields its rule read
    for pname, rule in family.params:
        before = len(checked.log)
        value = _run(rule, checked, where, f"`{pname}`")
        reads[pname] = checked.log[before:]
        if isinstance(value, bool) or not isinstance(value, int | float):
            culprit = reads[pname][-1] if reads[pname] else pname
            raise _Bad(culprit, f"`{pname}` must come from a number; the config gives "
                       f"{_show(value)}")  # fmt: skip
        values.append((pname, value))
    blocks = _run(family.block_text, checked, where, "the layer")
    model = _run(family.model, checked, where, "the model")
    dtype = _run(_dtype, checked, where, "dtype")
    recipe = _run(lambda m: _recipe(m, family, where.text, where.filename), checked, where,
                  "the recipe")  # fmt: skip
    source = where.filename.rsplit("/", 1)[-1]
    ident = _identifier(name or re.sub(r"\.json$", "", source))
    used = ", ".join(_cite(k, c[k]) for k in sorted(set(checked.log)))
    model_type = c.get("model_type") or MAMBA_SSM
    header = (
        f"Imported from {source} (model_type {model_type}) by `modelcost import`. "
        f"Fields used: {used}. Fields a config omits take the defaults of "
        f"{family.reference}."
    )
    lines = [
        *(f"# {line}" for line in textwrap.wrap(header, 86, break_on_hyphens=False)),
        "",
        *blocks.replace("@layer", f"{ident}_layer").splitlines(),
        "",
        f"model {ident} {{",
        f"title = {_string(_title(config, source))}",
        *(f"{p} = {_number(v)}" for p, v in values),
        f"dtype = {dtype}",
        *([f"recipe = {recipe}"] if recipe else []),
        "",
        *model.replace("@layer", f"{ident}_layer").splitlines(),
        "}",
    ]
    try:  # what it writes must compile
        out = format_source("\n".join(lines) + "\n", "<imported>")
        parse_spec(out, "<imported>")
    except SpecError as err:
        raise _blame(err, {**{f: [f] for f in checked.log}, **reads}, c, where) from None
    return out


def _run(rule: Callable[[Config], Any], c: _Checked, where: _Where, what: str) -> Any:
    """A rule's result; any failure a SpecError at the field it concerns (the last the
    rule read), never a Python exception."""
    try:
        return rule(c)
    except _Bad:
        raise
    except KeyError as err:
        missing = err.args[0] if err.args else None
        last = c.last
        if last is not None and missing == c.get(last):  # a name no table maps
            known = ", ".join(sorted({*GATED, *PLAIN}))
            raise _Bad(last, f"`{last}` = {_show(missing)} is not a name the importer "
                       f"knows (known activations: {known})") from None  # fmt: skip
        if isinstance(missing, str):
            raise SpecError(f"the config lacks `{missing}`, which {what} needs",
                            filename=where.filename, hint=where.hint) from None  # fmt: skip
        raise _Bad(last or "model_type", f"{what} cannot be read ({_show(missing)})") from None
    except (TypeError, ValueError, ArithmeticError, AttributeError, IndexError) as err:
        field = c.last or "model_type"
        raise _Bad(field, f"`{field}` = {_show(c.get(field))} cannot be read: "
                   f"{str(err)[:80]}") from None  # fmt: skip


# How each field a family reads must look, by the last part of its name (a composite
# config's `vision_config.hidden_size` as `hidden_size`). Any other field is a count: a
# positive whole number (or one of ZERO_OK, where 0 means none).
NAMED_LAST = frozenset({*(n.rpartition(".")[2] for n in NAMED), "model_type"})
FLAGS = frozenset({"tie_word_embeddings", "tie_embeddings", "attention_bias", "mlp_bias",
                   "qkv_bias", "use_sliding_window", "use_qk_norm", "is_decoder",
                   "vision_use_head", "multi_modal_projector_bias",
                   "multimodal_projector_bias"})  # fmt: skip
OBJECTS = frozenset({"quantization_config", "ssm_cfg", "text_config", "vision_config",
                     "id2label"})  # fmt: skip
LISTS = frozenset({"layer_types", "no_rope_layers", "mlp_only_layers", "attn_layer_idx",
                   "block_configs"})  # fmt: skip
# null means "not set": the family's rule falls back (head_dim from the width, ...)
NULLABLE = frozenset({"head_dim", "num_key_value_heads", "num_local_experts",
                      "moe_intermediate_size", "sliding_window", "sliding_window_pattern",
                      "n_inner", "q_lora_rank", "n_shared_experts", "n_group", "topk_group",
                      "num_nextn_predict_layers", "num_decoder_layers", "n_positions",
                      "attn_logit_softcapping", "final_logit_softcapping", "torch_dtype",
                      "topk_method", "scoring_func", *OBJECTS, *LISTS, *FLAGS})  # fmt: skip
ZERO_OK = frozenset({"first_k_dense_replace", "n_shared_experts", "q_lora_rank",
                     "num_nextn_predict_layers", "d_intermediate", "sliding_window"})  # fmt: skip
REALS = frozenset({"attn_logit_softcapping", "final_logit_softcapping", "pixel_shuffle_ratio"})
SIGNED = frozenset({"vision_feature_layer"})  # a hidden-state index (−1: the last), or a list
LAYER_COUNTS = frozenset({"num_hidden_layers", "n_layer", "num_layers", "num_decoder_layers",
                          "encoder_layers", "decoder_layers", "first_k_dense_replace",
                          "num_nextn_predict_layers"})  # fmt: skip
# an import writes its layers as one `repeat`, whose count the language bounds
MAX_LAYERS = MAX_REPEAT


def _checked_value(field: str, value: Any) -> Any:
    """`value` if it is of the kind `field` takes (an integral float as an int), else
    `_Bad` naming the field."""
    last = field.rpartition(".")[2]
    kinds = ((FLAGS, bool, "true or false"), (OBJECTS, dict, "an object"),
             (LISTS, list, "a list"), (NAMED_LAST, str, "a name (a string)"))  # fmt: skip
    if value is None:
        if last in NULLABLE:
            return None
        raise _Bad(field, f"`{field}` must be set, got null")
    for names, kind, said in kinds:
        if last in names:
            if not isinstance(value, kind):
                raise _Bad(field, f"`{field}` must be {said}, got {_show(value)}")
            return value
    if last in SIGNED and isinstance(value, list):
        return value
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _Bad(field, f"`{field}` must be a number, got {_show(value)}")
    if last in REALS:
        if value < 0:
            raise _Bad(field, f"`{field}` must not be negative, got {_show(value)}")
        return value
    if isinstance(value, float):
        if not value.is_integer():
            raise _Bad(field, f"`{field}` must be a whole number, got {_show(value)}")
        value = int(value)
    if last in SIGNED:
        return value
    if value < (0 if last in ZERO_OK else 1):
        sign = "non-negative" if last in ZERO_OK else "positive"
        raise _Bad(field, f"`{field}` must be a {sign} whole number, got {value}")
    if value > MAX_DIM:
        raise _Bad(field, f"`{field}` = {_show(value)}: sizes are bounded by {MAX_DIM:,}")
    if last in LAYER_COUNTS and value > MAX_LAYERS:
        raise _Bad(field, f"`{field}` = {value:,}: an import writes at most {MAX_LAYERS:,} "
                   "layers (the language's bound on a repeat count)")  # fmt: skip
    return value


class _Checked(dict):
    """A config whose values are checked as a rule reads them (`_checked_value`), and
    which logs the fields read, in order (the last one read is the one a failing rule
    is blamed on)."""

    def __init__(self, c: Config) -> None:
        super().__init__(c)
        self.log: list[str] = []

    @property
    def last(self) -> str | None:
        return self.log[-1] if self.log else None

    def __getitem__(self, k: str) -> Any:
        self.log.append(k)
        return _checked_value(k, super().__getitem__(k))

    def get(self, k: str, default: Any = None) -> Any:
        if k not in self:
            return default
        return self[k]


def _blame(err: SpecError, reads: dict[str, list[str]], c: Config, where: _Where) -> SpecError:
    """An error in the generated text, pointed at the config field behind it: the
    parameter (or field) at the error's column, else the first one its message or its
    line names, and the field that parameter's rule read first."""
    line = err.source_line or ""
    at = re.match(r"\w+", line[max(err.column - 1, 0) :])
    words = [at.group()] if at else []
    words += re.findall(r"\w+", err.message) + re.findall(r"\w+", line)
    for word in words:
        fields = reads.get(word) or []
        if fields:
            field = fields[0]
            return _field(where.text, where.filename, field,
                          f"`{field}` = {_show(c.get(field))}: {_clip(err.message)}",
                          where.hint)  # fmt: skip
    return SpecError(f"the imported model does not compile: {_clip(err.message)}",
                     filename=where.filename, hint=where.hint)  # fmt: skip


def _title(config: Config, source: str) -> str:
    """The model's title: the checkpoint's `_name_or_path` (a hub id as it is, a local
    path by its last part), else its architecture (or model_type) and the file."""
    named = config.get("_name_or_path")
    if isinstance(named, str) and named.strip(" /."):
        named = named.strip().rstrip("/")
        return named.rsplit("/", 1)[-1] if named.startswith(("/", ".", "~")) else named
    archs = config.get("architectures")
    arch = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None
    model_type = config.get("model_type")
    kind = arch or (model_type if isinstance(model_type, str) else MAMBA_SSM)
    return f"{kind} from {source}"


MAX_TITLE = 80  # characters of a title taken from a config


def _string(text: str) -> str:
    """A `.model` string literal of `text`: printable characters only (no control, bidi
    or zero-width ones), at most MAX_TITLE of them, quotes and backslashes escaped."""
    shown = "".join(ch if ch.isprintable() else " " for ch in text)
    shown = " ".join(shown.split())[:MAX_TITLE] or "imported"
    return '"' + shown.replace("\\", "\\\\").replace('"', '\\"') + '"'


MAX_SHOWN = 60  # characters of a config value quoted in a message


def _show(value: Any, limit: int = MAX_SHOWN) -> str:
    """A config value for a message: its JSON, cut to `limit` characters (a long list
    or object also says how many entries it has)."""
    try:
        shown = json.dumps(value)
    except (TypeError, ValueError):
        shown = repr(value)
    if len(shown) <= limit:
        return shown
    size = f" ({len(value):,} entries)" if isinstance(value, dict | list) else ""
    return shown[: limit - 1] + "…" + size


def _clip(message: str, limit: int = 200) -> str:
    return message if len(message) <= limit else message[: limit - 1] + "…"


def _dtype(c: Config) -> str:
    """fp16 for a float16 checkpoint; bf16 otherwise (float32 ones are served in bf16)."""
    return "fp16" if c.get("torch_dtype") == "float16" else "bf16"


QUANTIZED = {  # quant_method → the recipe, from the config's own fields
    "fp8": lambda q: "fp8_block" if q.get("weight_block_size") == [128, 128] else "fp8",
    "awq": lambda q: "w4a16" if q.get("bits") == 4 else None,
    "gptq": lambda q: "w4a16" if q.get("bits") == 4 else None,
}


def _quant_method(c: Config) -> str | None:
    """quantization_config's quant_method (a name, or None when there is none)."""
    q = c.get("quantization_config") or {}
    method = q.get("quant_method")
    if method is not None and not isinstance(method, str):
        field = "quantization_config.quant_method"
        raise _Bad(field, f"`{field}` must be a name, got {_show(method)}")
    return method


def _recipe(c: Config, family: Family, text: str, filename: str) -> str | None:
    """The precision recipe a checkpoint's quantization_config states (a family that
    quantizes only some layers, gpt-oss's experts, writes its own)."""
    q = c.get("quantization_config")
    if not q or family.quantization:
        return None
    rule = QUANTIZED.get(_quant_method(c) or "")
    recipe = rule(q) if rule else None
    if recipe is None:
        raise _field(text, filename, "quantization_config",
                     f"`quantization_config` = {_show(q, 80)} has no recipe here",
                     "recipes: fp8 (per-tensor or 128×128 blocks), awq/gptq 4-bit; "
                     "or drop it and set `recipe` by hand")  # fmt: skip
    return recipe


def _cite(field: str, value: Any) -> str:
    """`hidden_size 4096`; a long list or mapping by its length."""
    shown = json.dumps(value)
    if isinstance(value, dict | list) and len(shown) > 40:
        return f"{field} ({len(value)} entries)"
    return f"{field} {shown}"


def _number(v: Any) -> str:
    """`128_256`: the zoo's spelling of a large count."""
    return f"{v:_}" if isinstance(v, int) and not isinstance(v, bool) and v >= 10_000 else str(v)


def _identifier(stem: str) -> str:
    ident = re.sub(r"\W", "_", stem).strip("_") or "imported"
    return ident if not ident[0].isdigit() else f"m_{ident}"


MAX_SOURCE_LINE = 200  # a longer line (a config written on one line) is not echoed


def _at(
    text: str, filename: str, line: int, column: int, message: str, hint: str | None = None
) -> SpecError:
    lines = text.splitlines()
    source = lines[line - 1] if 0 < line <= len(lines) else None
    if source is not None and len(source) > MAX_SOURCE_LINE:
        source = None
    return SpecError(message, filename=filename, line=line, column=column, hint=hint,
                     source_line=source)  # fmt: skip


def _at_offset(
    text: str, filename: str, offset: int, message: str, hint: str | None = None, width: int = 1
) -> SpecError:
    line_start = text.rfind("\n", 0, offset) + 1
    err = _at(text, filename, text.count("\n", 0, offset) + 1, offset - line_start + 1,
              message, hint)  # fmt: skip
    err.width = width
    return err


def _field(text: str, filename: str, field: str, message: str, hint: str) -> SpecError:
    """An error pointing at the field's key in the JSON text (a composite config's
    language-model field in its text_config), or at the file when the config omits it."""
    keys = _scan(text, filename)
    for path in (f"text_config.{field}", field):
        if path in keys:
            offset, width = keys[path]
            return _at_offset(text, filename, offset, message, hint, width)
        inside = [keys[k] for k in keys if k.startswith(f"{path}.")]
        if inside:  # a list item (no key of its own): its first key
            offset, width = min(inside)
            return _at_offset(text, filename, offset, message, hint, width)
    return SpecError(message, filename=filename, hint=hint)


# JSON's tokens: strings, punctuation, and any other run (numbers, true, NaN, ...)
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+')
_NOT_FINITE = frozenset({"NaN", "Infinity", "-Infinity"})


def _scan(text: str, filename: str) -> dict[str, tuple[int, int]]:
    """Where each key of the JSON text is (its dotted path, list items by index → its
    offset and width), in one pass without recursion, refusing at its place what
    `json` would choke on or carry silently: nesting deeper than the language's
    MAX_NESTING, number literals longer than its MAX_NUMBER_CHARS, and NaN, Infinity
    or numbers too large for a double (1e400). Malformed JSON is left to `json`."""
    keys: dict[str, tuple[int, int]] = {}
    names: list[str] = []  # per open container: the key or index of the current value
    objects: list[bool] = []  # per open container: an object (else a list)
    expect_key = False
    for m in _JSON_TOKEN.finditer(text):
        tok = m.group()
        first = tok[0]
        if first in "{[":
            if len(objects) >= MAX_NESTING:
                raise _at_offset(text, filename, m.start(), f"the JSON nests more than "
                                 f"{MAX_NESTING} levels deep", "a config.json nests a few "
                                 "levels")  # fmt: skip
            objects.append(first == "{")
            names.append("0")
            expect_key = first == "{"
        elif first in "}]":
            if objects:
                objects.pop()
                names.pop()
            expect_key = False
        elif first == ",":
            if objects and objects[-1]:
                expect_key = True
            elif names:
                names[-1] = str(int(names[-1]) + 1)
        elif first == ":":
            expect_key = False
        elif first == '"':
            if expect_key and objects and objects[-1]:
                try:
                    names[-1] = json.loads(tok)
                except ValueError:
                    names[-1] = tok[1:-1]
                path = ".".join(names)
                if path in keys:  # json would keep the last silently
                    raise _at_offset(text, filename, m.start(), f"duplicate key `{path}`: "
                                     "JSON keeps the last of them", "give each key once",
                                     len(tok))  # fmt: skip
                keys[path] = (m.start(), len(tok))
        else:
            _check_literal(tok, m.start(), names, text, filename)
    return keys


def _check_literal(tok: str, offset: int, names: list[str], text: str, filename: str) -> None:
    """Refuse, at its place, a JSON literal that is not a finite number of a sane size."""
    path = ".".join(names) or "the config"
    shown = tok if len(tok) <= 24 else tok[:23] + "…"
    if tok in _NOT_FINITE or (tok[0] in "-0123456789" and len(tok) <= MAX_NUMBER_CHARS
                              and _overflows(tok)):  # fmt: skip
        raise _at_offset(text, filename, offset, f"`{path}` is {shown}, not a finite number",
                         "a config's numbers are finite; JSON has no NaN or Infinity",
                         min(len(tok), 24))  # fmt: skip
    if tok[0] in "-0123456789" and len(tok) > MAX_NUMBER_CHARS:
        raise _at_offset(text, filename, offset, f"`{path}` is a number of {len(tok):,} "
                         f"characters (the limit is {MAX_NUMBER_CHARS})", None, 24)  # fmt: skip


def _overflows(tok: str) -> bool:
    try:
        return math.isinf(float(tok))
    except ValueError:  # not a number: json reports it
        return False
