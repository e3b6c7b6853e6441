"""The Spec IR: a resolved, validated model architecture as frozen pydantic models.

Produced by `resolve`, consumed by parameter counting and lowering. Nothing here knows
about source text: two specs that mean the same architecture compare equal.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field

from .dtypes import DType
from .frozen import Frozen

SCHEMA_VERSION = 1


class IR(Frozen):
    """A node of the Spec IR (validators built on first use: the recursive layer union
    especially costs more to build than a spec costs to compile)."""


class Activation(StrEnum):
    gelu = "gelu"
    gelu_tanh = "gelu_tanh"
    relu = "relu"
    silu = "silu"
    swiglu = "swiglu"  # silu(gate) * up
    geglu = "geglu"  # gelu(gate) * up

    @property
    def gated(self) -> bool:
        return self in (Activation.swiglu, Activation.geglu)


class Router(StrEnum):
    """How a MoE router turns logits into expert scores."""

    softmax = "softmax"  # Mixtral, Qwen3-MoE, gpt-oss
    sigmoid = "sigmoid"  # DeepSeek-V3 (`scoring_func: sigmoid`)


class DtypePolicy(IR):
    """Dtypes by role: weights, activations, and the KV cache."""

    weights: DType
    activations: DType
    kv_cache: DType


class _Op(IR):
    dim: int = Field(description="model (residual stream) width")
    dtypes: DtypePolicy


class Embedding(_Op):
    """Token embedding table, vocab × dim."""

    kind: Literal["embed"] = "embed"
    vocab: int


class PositionEmbedding(_Op):
    """Learned absolute position embeddings, positions × dim."""

    kind: Literal["pos_embed"] = "pos_embed"
    positions: int


class PatchEmbed(_Op):
    """Vision patch embedding: a conv with kernel = stride = patch, plus an optional class token."""

    kind: Literal["patch_embed"] = "patch_embed"
    image: int
    patch: int
    channels: int
    bias: bool
    cls_token: bool


class Norm(_Op):
    kind: Literal["layernorm", "rmsnorm"]
    bias: bool = False


class Attention(_Op):
    """Multi-head attention with free head_dim; MHA when kv_heads = heads, MQA when 1."""

    kind: Literal["attention"] = "attention"
    heads: int
    kv_heads: int
    head_dim: int
    qkv_bias: bool
    out_bias: bool
    fused_qkv: bool = Field(description="one GEMM computes q, k and v (GPT-2's c_attn)")
    qk_norm: bool
    rope: bool
    window: int = Field(description="sliding-window size in tokens; 0 = full attention")
    softcap: float = Field(description="logit soft-capping value; 0 = off")
    sinks: bool = Field(description="one learned attention-sink logit per head")
    causal: bool


class MLA(_Op):
    """Multi-head latent attention (DeepSeek-V2/V3)."""

    kind: Literal["mla"] = "mla"
    heads: int
    q_lora_rank: int = Field(description="0 = queries projected directly from the input")
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    causal: bool


class MLP(_Op):
    kind: Literal["mlp"] = "mlp"
    d_ff: int
    act: Activation
    bias: bool
    fused_gate_up: bool = Field(
        default=False, description="one GEMM computes gate and up (Phi-3's gate_up_proj)"
    )


class MoE(_Op):
    """Mixture of experts: a router, `experts` routed experts (top_k per token), shared experts."""

    kind: Literal["moe"] = "moe"
    experts: int
    top_k: int
    d_ff: int
    shared_experts: int
    shared_d_ff: int
    act: Activation
    bias: bool
    router_bias: bool = Field(description="a bias on the router logits (gpt-oss)")
    router: Router = Field(description="scoring function: softmax or sigmoid")
    groups: int = Field(description="expert groups for group-limited routing (n_group)")
    groups_kept: int = Field(description="groups a token may route into (topk_group)")
    correction_bias: bool = Field(
        description="a per-expert bias added to the scores for selection only "
        "(DeepSeek-V3's e_score_correction_bias)"
    )


class Mamba2(_Op):
    """Mamba-2 SSD mixer: in_proj, causal conv1d, SSD scan, gated RMSNorm, out_proj."""

    kind: Literal["mamba2"] = "mamba2"
    d_state: int
    d_conv: int
    expand: int
    head_dim: int
    groups: int
    chunk: int
    conv_bias: bool
    bias: bool

    @property
    def d_inner(self) -> int:
        return self.expand * self.dim

    @property
    def heads(self) -> int:
        return self.d_inner // self.head_dim


class Residual(_Op):
    kind: Literal["residual"] = "residual"


class LMHead(_Op):
    kind: Literal["lm_head"] = "lm_head"
    vocab: int
    tied: bool
    bias: bool
    softcap: float


class Classifier(_Op):
    """Classification head on the pooled (class-token) representation."""

    kind: Literal["classifier"] = "classifier"
    classes: int
    bias: bool


class Repeat(IR):
    """`count` identical copies of `body`, in sequence."""

    kind: Literal["repeat"] = "repeat"
    count: int
    body: tuple[Statement, ...]


class Block(IR):
    """One expansion of a user block; keeps the block's name for grouping."""

    kind: Literal["block"] = "block"
    name: str
    body: tuple[Statement, ...]


Op = (
    Embedding
    | PositionEmbedding
    | PatchEmbed
    | Norm
    | Attention
    | MLA
    | MLP
    | MoE
    | Mamba2
    | Residual
    | LMHead
    | Classifier
)
Statement = Annotated[Op | Repeat | Block, Field(discriminator="kind")]
ParamValue = bool | int | float | str


class Spec(IR):
    """A resolved model: its parameters, default dtypes and layer tree."""

    schema_version: int = SCHEMA_VERSION
    name: str
    title: str
    params: dict[str, ParamValue]
    dtypes: DtypePolicy
    body: tuple[Statement, ...]
