"""How each config field a family reads must look (a flag, an object, a name, a bounded
count), checked as a rule reads it."""

from __future__ import annotations

import json
import math
from typing import Any

from modelcost.language.expressions import MAX_DIM
from modelcost.language.resolve import MAX_REPEAT

Config = dict[str, Any]  # a config.json's fields, read by the families' rules

# fields whose values are names (mapped through a table, never written as they are)
NAMED = frozenset({"hidden_act", "hidden_activation", "activation_function",
                   "position_embedding_type", "scoring_func", "topk_method",
                   "feed_forward_proj", "projector_hidden_act", "vision_config.hidden_act",
                   "vision_feature_select_strategy", "torch_dtype", "text_config.model_type",
                   "vision_config.model_type"})  # fmt: skip


class _Bad(Exception):
    """A config value the importer refuses, by its field; turned into a SpecError that
    points at the field in the config's text."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field, self.message = field, message


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


def _quant_method(c: Config) -> str | None:
    """quantization_config's quant_method (a name, or None when there is none)."""
    q = c.get("quantization_config") or {}
    method = q.get("quant_method")
    if method is not None and not isinstance(method, str):
        field = "quantization_config.quant_method"
        raise _Bad(field, f"`{field}` must be a name, got {_show(method)}")
    return method
