"""Configs of model_type `nemotron-nas`, as DeciLMConfig (NVIDIA's configuration_decilm.py;
per-block attention and FFN from block_configs, FFN width by modeling_decilm.py's
_ffn_mult_to_intermediate_size): the family's row (`FAMILY`) and what only it writes."""

from __future__ import annotations

import math
from typing import Any

from modelcost.language.expressions import MAX_DIM

from .checks import _Bad, _show
from .family import MAX_PATTERN, Config, Family, _flags, _gated_act, _head, head_dim, key

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


FAMILY = Family(
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
)
