"""The Spec IR's mixing layers, a class each declaring its statement: attention (self,
cross, MLA), the feed-forward (MLP, mixture of experts) and the recurrent mixers
(Mamba-2, Gated DeltaNet).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, ClassVar, Literal

from pydantic import Field

from .spec_base import (
    Activation,
    AttentionKernel,
    Kernel,
    Router,
    T,
    _check_attention,
    _check_deltanet,
    _check_gqa,
    _check_mamba2,
    _check_mlp,
    _check_moe,
    _default_head_dim,
    _default_mamba_heads,
    _Op,
)
from .vocabulary import Arg, Derived


class _Heads(_Op):
    """Query and key/value heads with their projections (attention, cross-attention)."""

    heads: Annotated[int, Arg(T.DIM), Field(description="query heads")]
    kv_heads: Annotated[
        int,
        Arg(T.DIM, Derived("heads", lambda v: v["heads"])),
        Field(description="key/value heads: heads for MHA, 1 for MQA, a divisor of heads for GQA"),
    ]
    head_dim: Annotated[
        int,
        Arg(T.DIM, Derived("dim / heads", _default_head_dim)),
        Field(description="width of each head"),
    ]
    qkv_bias: Annotated[
        bool, Arg(T.BOOL, False), Field(description="biases on the q, k and v projections")
    ]
    k_bias: Annotated[
        bool,
        Arg(T.BOOL, Derived("qkv_bias", lambda v: v["qkv_bias"])),
        Field(description="a bias on k_proj (Whisper has q and v biases only)"),
    ]
    out_bias: Annotated[
        bool, Arg(T.BOOL, False), Field(description="a bias on the output projection")
    ]
    takes_kv_dtype: ClassVar[bool] = True
    quantized: ClassVar[bool] = True


class Attention(_Heads):
    """Multi-head attention with free head_dim; MHA when kv_heads = heads, MQA when 1."""

    kind: Literal["attention"] = "attention"
    fused_qkv: Annotated[
        bool, Arg(T.BOOL, False), Field(description="one GEMM computes q, k and v (GPT-2's c_attn)")
    ]
    qk_norm: Annotated[
        bool,
        Arg(T.BOOL, False),
        Field(description="an RMSNorm of q and k per head before attention (Qwen3, Gemma 3)"),
    ]
    rope: Annotated[
        bool, Arg(T.BOOL, True), Field(description="rotary position embedding on q and k")
    ]
    window: Annotated[
        int, Arg(T.COUNT, 0), Field(description="sliding-window size in tokens; 0 = full attention")
    ]
    softcap: Annotated[
        float, Arg(T.NUMBER, 0.0), Field(description="logit soft-capping value; 0 = off")
    ]
    sinks: Annotated[
        bool, Arg(T.BOOL, False), Field(description="one learned attention-sink logit per head")
    ]
    chunk: Annotated[
        int,
        Arg(T.COUNT, 0),
        Field(
            description="chunked attention: each query sees its own chunk of this many "
            "tokens (Llama 4's local layers); 0 = off"
        ),
    ]
    qk_l2_norm: Annotated[
        bool,
        Arg(T.BOOL, False),
        Field(description="L2-normalize q and k per head, without a weight (Llama 4)"),
    ]
    gate: Annotated[
        bool,
        Arg(T.BOOL, False),
        Field(
            description="an output gate: q_proj also emits a sigmoid gate on the "
            "attention output (Qwen3-Next)"
        ),
    ]
    causal: Annotated[
        bool,
        Arg(T.BOOL, True),
        Field(
            description="each query sees only earlier keys (a decoder); false: bidirectional "
            "(an encoder)"
        ),
    ]
    kernel: Kernel = AttentionKernel.flash
    scope: ClassVar[str] = "attn"
    check: ClassVar[Callable[[dict], None] | None] = staticmethod(_check_attention)

    @property
    def decodes(self) -> bool:
        return self.causal


class CrossAttention(_Heads):
    """Attention from this stream's tokens to another stream's output (an encoder's):
    queries from here, keys and values projected from `source`'s tokens once (prefill
    writes them to a cross-attention cache that every decode step reads)."""

    kind: Literal["cross_attention"] = "cross_attention"
    source: Annotated[
        str,
        Arg(T.STREAM, "encoder"),
        Field(description="the stream whose output is attended to"),
    ]
    kernel: Kernel = AttentionKernel.flash
    # the source stream's width (what k_proj and v_proj read), set by the resolver
    source_dim: int = 0
    scope: ClassVar[str] = "cross_attn"
    check: ClassVar[Callable[[dict], None] | None] = staticmethod(_check_gqa)


class MLA(_Op):
    """Multi-head latent attention (DeepSeek-V2/V3)."""

    kind: Literal["mla"] = "mla"
    heads: Annotated[int, Arg(T.DIM), Field(description="query heads")]
    kv_lora_rank: Annotated[
        int,
        Arg(T.DIM),
        Field(
            description="width of the compressed key/value latent that is cached (DeepSeek-V3: 512)"
        ),
    ]
    qk_nope_head_dim: Annotated[
        int, Arg(T.DIM), Field(description="per head, the query/key width without rotary position")
    ]
    qk_rope_head_dim: Annotated[
        int,
        Arg(T.DIM),
        Field(
            description="per head, the query/key width with rotary position (shared across "
            "heads in the cache)"
        ),
    ]
    v_head_dim: Annotated[int, Arg(T.DIM), Field(description="per head, the value width")]
    q_lora_rank: Annotated[
        int, Arg(T.COUNT, 0), Field(description="0 = queries projected directly from the input")
    ]
    causal: Annotated[
        bool, Arg(T.BOOL, True), Field(description="each query sees only earlier keys")
    ]
    kernel: Kernel = AttentionKernel.flash
    scope: ClassVar[str] = "attn"
    takes_kv_dtype: ClassVar[bool] = True
    quantized: ClassVar[bool] = True

    @property
    def decodes(self) -> bool:
        return self.causal


class MLP(_Op):
    kind: Literal["mlp"] = "mlp"
    quantized: ClassVar[bool] = True
    d_ff: Annotated[int, Arg(T.DIM), Field(description="hidden width of the feed-forward layer")]
    act: Annotated[
        Activation,
        Arg(T.ACT, Activation.swiglu),
        Field(description="activation; swiglu and geglu are gated (a gate and an up projection)"),
    ]
    bias: Annotated[bool, Arg(T.BOOL, False), Field(description="biases on its projections")]
    fused_gate_up: Annotated[
        bool,
        Arg(T.BOOL, False),
        Field(description="one GEMM computes gate and up (Phi-3's gate_up_proj)"),
    ] = False
    scope: ClassVar[str] = "mlp"
    check: ClassVar[Callable[[dict], None] | None] = staticmethod(_check_mlp)


class MoE(_Op):
    """Mixture of experts: a router, `experts` routed experts (top_k per token), shared experts."""

    kind: Literal["moe"] = "moe"
    quantized: ClassVar[bool] = True
    experts: Annotated[int, Arg(T.DIM), Field(description="routed experts")]
    top_k: Annotated[int, Arg(T.DIM), Field(description="experts each token is routed to")]
    d_ff: Annotated[int, Arg(T.DIM), Field(description="hidden width of each routed expert")]
    shared_experts: Annotated[
        int,
        Arg(T.COUNT, 0),
        Field(description="experts every token runs, beside the routed ones (DeepSeek, Qwen2-MoE)"),
    ]
    shared_d_ff: Annotated[
        int,
        Arg(T.DIM, Derived("d_ff", lambda v: v["d_ff"])),
        Field(description="the width of one shared expert"),
    ]
    act: Annotated[
        Activation,
        Arg(T.ACT, Activation.swiglu),
        Field(description="the experts' activation; swiglu and geglu are gated"),
    ]
    bias: Annotated[
        bool, Arg(T.BOOL, False), Field(description="biases on the experts' projections")
    ]
    router_bias: Annotated[
        bool, Arg(T.BOOL, False), Field(description="a bias on the router logits (gpt-oss)")
    ]
    router: Annotated[
        Router,
        Arg(T.ROUTER, Router.softmax),
        Field(description="scoring function: softmax or sigmoid"),
    ]
    groups: Annotated[
        int, Arg(T.DIM, 1), Field(description="expert groups for group-limited routing (n_group)")
    ]
    groups_kept: Annotated[
        int,
        Arg(T.DIM, Derived("groups", lambda v: v["groups"])),
        Field(description="groups a token may route into (topk_group)"),
    ]
    correction_bias: Annotated[
        bool,
        Arg(T.BOOL, False),
        Field(
            description="a per-expert bias added to the scores for selection only "
            "(DeepSeek-V3's e_score_correction_bias)"
        ),
    ]
    shared_gate: Annotated[
        bool,
        Arg(T.BOOL, False),
        Field(
            description="a sigmoid gate (one dim → 1 linear) scaling the shared experts' "
            "output (Qwen2-MoE's shared_expert_gate)"
        ),
    ]
    scope: ClassVar[str] = "moe"
    check: ClassVar[Callable[[dict], None] | None] = staticmethod(_check_moe)


class Mamba2(_Op):
    """Mamba-2 SSD mixer: in_proj, causal conv1d, SSD scan, gated RMSNorm, out_proj."""

    kind: Literal["mamba2"] = "mamba2"
    quantized: ClassVar[bool] = True
    d_state: Annotated[int, Arg(T.DIM, 128), Field(description="SSM state size per head (N)")]
    d_conv: Annotated[
        int, Arg(T.DIM, 4), Field(description="taps of the causal depthwise convolution")
    ]
    expand: Annotated[int, Arg(T.DIM, 2), Field(description="inner width over the model width")]
    head_dim: Annotated[int, Arg(T.DIM, 64), Field(description="width of each SSD head (P)")]
    groups: Annotated[
        int, Arg(T.DIM, 1), Field(description="B/C groups shared by the heads (ngroups)")
    ]
    chunk: Annotated[
        int,
        Arg(T.DIM, 256),
        Field(description="chunk length of the chunked SSD scan (prefill and training)"),
    ]
    conv_bias: Annotated[bool, Arg(T.BOOL, True), Field(description="a bias on the convolution")]
    bias: Annotated[bool, Arg(T.BOOL, False), Field(description="biases on in_proj and out_proj")]
    heads: Annotated[
        int,
        Arg(T.DIM, Derived("expand * dim / head_dim", _default_mamba_heads)),
        Field(
            description="SSD heads; set directly, the inner width is heads × head_dim "
            "whatever expand says (Falcon-H1's d_ssm)"
        ),
    ]
    scope: ClassVar[str] = "mamba"
    check: ClassVar[Callable[[dict], None] | None] = staticmethod(_check_mamba2)

    @property
    def decodes(self) -> bool:
        return True  # a recurrent state

    @property
    def d_inner(self) -> int:
        return self.heads * self.head_dim


class GatedDeltaNet(_Op):
    """Gated DeltaNet linear attention (Qwen3-Next's `linear_attention` layers): q, k, v,
    z from one projection, β and the decay gate from another, a causal conv1d over
    q, k and v, the gated delta rule with a dk × dv state per value head, a gated
    RMSNorm and the output projection."""

    kind: Literal["gated_deltanet"] = "gated_deltanet"
    quantized: ClassVar[bool] = True
    k_heads: Annotated[int, Arg(T.DIM), Field(description="query/key heads")]
    v_heads: Annotated[
        int,
        Arg(T.DIM),
        Field(description="value heads, each with its own dk × dv state; a multiple of k_heads"),
    ]
    head_k_dim: Annotated[
        int, Arg(T.DIM, 128), Field(description="width of each query/key head (dk)")
    ]
    head_v_dim: Annotated[int, Arg(T.DIM, 128), Field(description="width of each value head (dv)")]
    d_conv: Annotated[
        int,
        Arg(T.DIM, 4),
        Field(description="taps of the causal depthwise convolution over q, k and v"),
    ]
    chunk: Annotated[
        int,
        Arg(T.DIM, 64),
        Field(description="chunk length of the chunked delta rule (prefill and training)"),
    ]
    scope: ClassVar[str] = "linear_attn"
    check: ClassVar[Callable[[dict], None] | None] = staticmethod(_check_deltanet)

    @property
    def decodes(self) -> bool:
        return True  # a recurrent state

    @property
    def key_dim(self) -> int:
        return self.k_heads * self.head_k_dim

    @property
    def value_dim(self) -> int:
        return self.v_heads * self.head_v_dim
