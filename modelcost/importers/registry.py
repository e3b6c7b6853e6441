"""The families the importer reads, one module each: adding a family is its module and
one line here (docs/contributing.md). `BY_TYPE` finds a config's family by its
`model_type`."""

from __future__ import annotations

from . import (
    bert,
    deepseek,
    gemma,
    gemma2,
    gemma3,
    gemma3_text,
    gpt2,
    gpt_oss,
    llama,
    llama4,
    llama4_text,
    llava,
    mamba2,
    mamba_ssm,
    mixtral,
    nemotron_nas,
    phi3,
    qwen2,
    qwen2_moe,
    qwen3,
    qwen3_moe,
    qwen3_next,
    t5,
    vit,
    whisper,
)
from .family import Family

FAMILIES: tuple[Family, ...] = (
    llama.FAMILY,
    qwen2.FAMILY,
    qwen3.FAMILY,
    mixtral.FAMILY,
    qwen3_moe.FAMILY,
    gpt2.FAMILY,
    gemma.FAMILY,
    gemma2.FAMILY,
    gpt_oss.FAMILY,
    deepseek.FAMILY,
    mamba_ssm.FAMILY,
    mamba2.FAMILY,
    phi3.FAMILY,
    vit.FAMILY,
    gemma3_text.FAMILY,
    qwen2_moe.FAMILY,
    bert.FAMILY,
    llama4_text.FAMILY,
    qwen3_next.FAMILY,
    t5.FAMILY,
    whisper.FAMILY,
    llava.FAMILY,
    gemma3.FAMILY,
    llama4.FAMILY,
    nemotron_nas.FAMILY,
)
BY_TYPE: dict[str, Family] = {t: f for f in FAMILIES for t in f.model_types}
