"""Hugging Face `config.json` → a readable `.model`: one module a model family.

A family says which `model_type`s it reads, the defaults its reference config class
defines for fields a config may omit (transformers' `LlamaConfig`, `MixtralConfig`, ...:
one place per family), the model parameters it takes from the config (each a config
key, or a small rule over the config), the fields whose values it cannot represent,
and the statements of its layer and of the model around it (`family.Family`). The
families are listed in `registry`; `reader` turns a config into text, citing every
config field it used, through `fmt`, so it is the canonical text.

Offline only: no hub access, no transformers.
"""

from .reader import import_config

__all__ = ["import_config"]
