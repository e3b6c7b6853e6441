"""The families the importer reads, one module each: adding a family is its module, its
import here and its entry in `FAMILIES` (docs/contributing.md). `BY_TYPE` finds a
config's family by its `model_type`."""

from __future__ import annotations

from .bert import FAMILY as BERT
from .deepseek import FAMILY as DEEPSEEK
from .family import Family
from .gemma import FAMILY as GEMMA
from .gemma2 import FAMILY as GEMMA2
from .gemma3 import FAMILY as GEMMA3
from .gemma3_text import FAMILY as GEMMA3_TEXT
from .gpt2 import FAMILY as GPT2
from .gpt_oss import FAMILY as GPT_OSS
from .llama import FAMILY as LLAMA
from .llama4 import FAMILY as LLAMA4
from .llama4_text import FAMILY as LLAMA4_TEXT
from .llava import FAMILY as LLAVA
from .mamba2 import FAMILY as MAMBA2
from .mamba_ssm import FAMILY as MAMBA_SSM
from .mixtral import FAMILY as MIXTRAL
from .nemotron_nas import FAMILY as NEMOTRON_NAS
from .phi3 import FAMILY as PHI3
from .qwen2 import FAMILY as QWEN2
from .qwen2_moe import FAMILY as QWEN2_MOE
from .qwen3 import FAMILY as QWEN3
from .qwen3_moe import FAMILY as QWEN3_MOE
from .qwen3_next import FAMILY as QWEN3_NEXT
from .t5 import FAMILY as T5
from .vit import FAMILY as VIT
from .whisper import FAMILY as WHISPER

FAMILIES: tuple[Family, ...] = (
    LLAMA,
    QWEN2,
    QWEN3,
    MIXTRAL,
    QWEN3_MOE,
    GPT2,
    GEMMA,
    GEMMA2,
    GPT_OSS,
    DEEPSEEK,
    MAMBA_SSM,
    MAMBA2,
    PHI3,
    VIT,
    GEMMA3_TEXT,
    QWEN2_MOE,
    BERT,
    LLAMA4_TEXT,
    QWEN3_NEXT,
    T5,
    WHISPER,
    LLAVA,
    GEMMA3,
    LLAMA4,
    NEMOTRON_NAS,
)
BY_TYPE: dict[str, Family] = {t: f for f in FAMILIES for t in f.model_types}
