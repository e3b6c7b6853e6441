"""Configs of model_type `mamba_ssm`, as mamba_ssm's MambaConfig and Mamba2 layer (state-
spaces/mamba): the family's row (`FAMILY`) and what only it writes."""

from __future__ import annotations

from .checks import _checked_value
from .family import STACK, Config, Family, key

MAMBA_SSM = "mamba_ssm"  # state-spaces' own format: no model_type, an `ssm_cfg`


def _ssm(c: Config, name: str, default: int) -> int:
    """A Mamba-2 layer's setting from `ssm_cfg` (read as any count field is)."""
    cfg = c.get("ssm_cfg") or {}
    return _checked_value(f"ssm_cfg.{name}", cfg[name]) if name in cfg else default


FAMILY = Family(
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
                -(-c["vocab_size"] // c["pad_vocab_size_multiple"]) * c["pad_vocab_size_multiple"]
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
)
