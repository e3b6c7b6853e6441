"""A family's table (`Family`) and the rules and statements several families share: Llama's
parameters and layer, MoE's, windowed stacks, vision towers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from modelcost.base.bounds import MAX_TOKENS
from modelcost.base.record import Record

from .checks import Config, _Bad, _checked_value

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


def _flatten(
    c: Config, family: Family, text_type: str, vision_defaults: Config, vision_type: str
) -> Config:
    """A composite config flattened: the language model's fields over its own family's
    (`family`, of model_type `text_type`) defaults, the tower's as `vision_config.*`
    over its class's."""
    text = _checked_value("text_config", c.get("text_config")) or {}
    vision = _checked_value("vision_config", c.get("vision_config")) or {}
    flat = {**c, **family.defaults, **text}
    flat["text_config.model_type"] = text.get("model_type", text_type)
    flat.update({f"vision_config.{k}": v for k, v in {**vision_defaults, **vision}.items()})
    flat["vision_config.model_type"] = vision.get("model_type", vision_type)
    return flat


def _patches(c: Config) -> int:
    return (c["vision_config.image_size"] // c["vision_config.patch_size"]) ** 2


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


def _tower_family(
    model_type: str,
    text: Family,
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
