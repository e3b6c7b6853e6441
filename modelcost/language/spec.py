"""The Spec IR: a resolved, validated model architecture as frozen pydantic models.

Produced by `resolve`, consumed by parameter counting and lowering. Nothing here knows
about source text: two specs that mean the same architecture compare equal.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from enum import StrEnum
from typing import Annotated, ClassVar, Literal, get_args

from pydantic import Field

from modelcost.base.dtypes import DType
from modelcost.base.frozen import Frozen

from .vocabulary import Arg, ArgType, CheckFailure, Derived, Ref

SCHEMA_VERSION = 1


class IR(Frozen):
    """A node of the Spec IR (validators built on first use: the recursive layer union
    especially costs more to build than a spec costs to compile)."""


class Activation(StrEnum):
    gelu = "gelu"
    gelu_tanh = "gelu_tanh"
    quick_gelu = "quick_gelu"  # x·sigmoid(1.702x) (CLIP)
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


class AttentionKernel(StrEnum):
    """The kernel an attention runs as: a fused flash kernel, or PyTorch's composite
    "math" SDPA (eager attention too), which materialises the score matrix."""

    flash = "flash"
    math = "math"


class DtypePolicy(IR):
    """Dtypes by role: weights, activations, and the KV cache; and the precision recipe
    its linear layers follow (recipes.py; the weights are the recipe's already)."""

    weights: DType
    activations: DType
    kv_cache: DType
    recipe: str = "none"


# ---------------------------------------------------------------- layer kinds
#
# One declaration per layer kind: the class is the Spec IR node, and its annotations
# are the statement's arguments (`Arg`: kind and default, in positional order; `dim`
# last). The `kind` literal is the statement's name; `scope` names its ops in the graph
# (`layers.3.attn.q_proj`); `check` validates bound values; `decodes` says whether the
# layer can run one token at a time; `starts_stream`, `width_out` and `tokens_out` what
# it does to the stream's width and token count (the resolver checks layers agree). Its
# lowering, parameters, memory, sharding and refusals are its room's in modelcost/kinds
# (docs/contributing.md).

T = ArgType


def _divides(small: str, big: str, values: dict, what: str) -> None:
    if values[big] % values[small]:
        raise CheckFailure(
            small,
            f"{small} = {values[small]} does not divide {big} = {values[big]}",
            what,
        )


def _check_gqa(v: dict) -> None:
    if v["heads"] % v["kv_heads"]:
        raise CheckFailure(
            "kv_heads",
            f"kv_heads = {v['kv_heads']} does not divide heads = {v['heads']}",
            "each KV head serves a whole group of query heads (GQA)",
        )


def _check_attention(v: dict) -> None:
    _check_gqa(v)
    if v["chunk"] and v["window"]:
        raise CheckFailure(
            "chunk",
            "an attention takes a sliding window or chunks, not both",
            "chunked attention (Llama 4) sees its own chunk; a window, the last n keys",
        )
    if v["chunk"] and not v["causal"]:
        raise CheckFailure("chunk", "chunked attention is causal", "drop causal = false")


# `kernel = flash | math`: the one declaration attention, cross_attention and mla share
Kernel = Annotated[
    AttentionKernel,
    Arg(T.KERNEL, AttentionKernel.flash),
    Field(
        description="the kernel it runs as: flash (a fused flash-attention kernel) or "
        "math (PyTorch's composite SDPA, eager attention: the score matrix materialised)"
    ),
]


def _default_head_dim(v: dict) -> int:
    if v["dim"] % v["heads"]:
        raise CheckFailure(
            "heads",
            f"heads = {v['heads']} does not divide dim = {v['dim']}",
            "set head_dim explicitly when it is not dim / heads",
        )
    return v["dim"] // v["heads"]


def _check_moe(v: dict) -> None:
    if v["top_k"] > v["experts"]:
        raise CheckFailure(
            "top_k",
            f"top_k = {v['top_k']} is larger than experts = {v['experts']}",
            "a token is routed to top_k distinct experts",
        )
    _divides("groups", "experts", v, "experts are split into equal groups")
    if v["groups_kept"] > v["groups"]:
        raise CheckFailure(
            "groups_kept",
            f"groups_kept = {v['groups_kept']} is larger than groups = {v['groups']}",
            "a token picks groups_kept of the groups, then top_k experts inside them",
        )
    per_group = v["experts"] // v["groups"]
    if v["top_k"] > v["groups_kept"] * per_group:
        raise CheckFailure(
            "top_k",
            f"top_k = {v['top_k']} is more than the {v['groups_kept'] * per_group} experts "
            f"of {v['groups_kept']} kept groups",
            "raise groups_kept or lower top_k",
        )


def _check_mlp(v: dict) -> None:
    if v["fused_gate_up"] and not v["act"].gated:
        raise CheckFailure(
            "fused_gate_up",
            f"fused_gate_up needs a gated activation, and `{v['act'].value}` has no gate",
            "use act = swiglu or geglu",
        )


def _default_mamba_heads(v: dict) -> int:
    d_inner = v["expand"] * v["dim"]
    if d_inner % v["head_dim"]:
        raise CheckFailure(
            "head_dim",
            f"head_dim = {v['head_dim']} does not divide expand * dim = {d_inner}",
            "the SSD heads split the inner width evenly (or set heads)",
        )
    return d_inner // v["head_dim"]


def _check_mamba2(v: dict) -> None:
    heads = v["heads"]
    if heads % v["groups"]:
        raise CheckFailure(
            "groups",
            f"groups = {v['groups']} does not divide the {heads} SSD heads",
            "B and C are shared by heads/groups heads each",
        )


def _check_deltanet(v: dict) -> None:
    _divides("k_heads", "v_heads", v, "groups of value heads share a key head")


def _check_patch(v: dict) -> None:
    _divides("patch", "image", v, "the image is cut into whole patches")


class _Op(IR):
    dim: Annotated[
        int, Arg(T.DIM, Ref("d_model")), Field(description="model (residual stream) width")
    ]
    dtypes: DtypePolicy

    scope: ClassVar[str]
    takes_kv_dtype: ClassVar[bool] = False
    quantized: ClassVar[bool] = False  # its linear layers follow the precision recipe
    check: ClassVar[Callable[[dict], None] | None] = None
    starts_stream: ClassVar[bool] = False  # it sets the stream's width (an embedding)
    # what it fixes a stream's length by, in words (an image, a token grid), or ""
    fixes_length: ClassVar[str] = ""

    @property
    def decodes(self) -> bool:
        """Whether the layer can run one new token at a time (causal attention over a
        cache, or a recurrent state): a model decodes if any of its layers does."""
        return False

    @property
    def width_out(self) -> int | None:
        """The stream's width after it, when it sets or changes it (None: it keeps it)."""
        return self.dim if self.starts_stream else None


class Embedding(_Op):
    """Token embedding table, vocab × dim."""

    kind: Literal["embed"] = "embed"
    vocab: Annotated[
        int, Arg(T.DIM), Field(description="vocabulary size: rows of the embedding table")
    ]
    tied: Annotated[
        bool,
        Arg(T.BOOL, False),
        Field(
            description="the table is another stream's (T5's shared embedding): no "
            "parameters of its own"
        ),
    ]
    scope: ClassVar[str] = "embed"
    starts_stream: ClassVar[bool] = True


class PositionEmbedding(_Op):
    """Learned absolute position embeddings, positions × dim."""

    kind: Literal["pos_embed"] = "pos_embed"
    positions: Annotated[
        int,
        Arg(T.DIM),
        Field(description="learned absolute positions: the longest sequence it embeds"),
    ]
    scope: ClassVar[str] = "pos_embed"


class TokenTypeEmbedding(_Op):
    """Learned token-type (segment) embeddings, types × dim, added to the stream (BERT's
    token_type_embeddings)."""

    kind: Literal["type_embed"] = "type_embed"
    types: Annotated[
        int,
        Arg(T.DIM),
        Field(
            description="token types (BERT's segments), each a learned vector added to the stream"
        ),
    ]
    scope: ClassVar[str] = "type_embed"


class PatchEmbed(_Op):
    """Vision patch embedding: a conv with kernel = stride = patch, plus an optional class token."""

    kind: Literal["patch_embed"] = "patch_embed"
    patch: Annotated[
        int,
        Arg(T.DIM),
        Field(description="patch side in pixels: a convolution of this kernel and stride"),
    ]
    image: Annotated[
        int,
        Arg(T.DIM),
        Field(description="image side in pixels: (image/patch)² patches are the stream's tokens"),
    ]
    channels: Annotated[int, Arg(T.DIM, 3), Field(description="input channels (3 for RGB)")]
    bias: Annotated[bool, Arg(T.BOOL, True), Field(description="a bias on the patch projection")]
    cls_token: Annotated[
        bool,
        Arg(T.BOOL, True),
        Field(description="a learned class token before the patches (one more token)"),
    ]
    scope: ClassVar[str] = "patch_embed"
    check: ClassVar[Callable[[dict], None] | None] = staticmethod(_check_patch)
    starts_stream: ClassVar[bool] = True
    fixes_length: ClassVar[str] = "image"

    @property
    def tokens(self) -> int:
        """The tokens one image becomes: (image / patch)² patches and the class token."""
        return (self.image // self.patch) ** 2 + (1 if self.cls_token else 0)


class ConvStem(_Op):
    """An audio encoder's front end (Whisper): two 1-D convolutions of kernel `kernel`
    over `mels` log-mel channels, the second with stride 2, each followed by GELU. It
    reads twice the stream's length in frames (3,000 for Whisper's 30 s) and writes the
    stream's length."""

    kind: Literal["conv_stem"] = "conv_stem"
    mels: Annotated[
        int, Arg(T.DIM), Field(description="log-mel input channels (Whisper: 128 for large-v3)")
    ]
    kernel: Annotated[int, Arg(T.DIM, 3), Field(description="kernel of both convolutions")]
    scope: ClassVar[str] = "conv_stem"
    starts_stream: ClassVar[bool] = True
    fixes_length: ClassVar[str] = "audio window (its convolutions and positions)"


class RelativePositionBias(_Op):
    """T5's relative position bias: a `buckets` × `heads` table, looked up once per
    (query, key) pair of a stream and added to every layer's attention logits."""

    kind: Literal["rel_pos_bias"] = "rel_pos_bias"
    heads: Annotated[int, Arg(T.DIM), Field(description="heads the bias table has a column for")]
    buckets: Annotated[int, Arg(T.DIM, 32), Field(description="relative-distance buckets (T5: 32)")]
    scope: ClassVar[str] = "rel_pos_bias"


class Norm(_Op):
    """LayerNorm or RMSNorm over the residual stream."""

    kind: Literal["layernorm", "rmsnorm"]
    bias: bool = False
    scope: ClassVar[str] = "norm"


class LayerNorm(Norm):
    kind: Literal["layernorm"] = "layernorm"
    bias: Annotated[
        bool, Arg(T.BOOL, True), Field(description="a learned bias (beta) beside the scale")
    ] = False


class RMSNorm(Norm):
    kind: Literal["rmsnorm"] = "rmsnorm"


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


class Linear(_Op):
    """A linear projection to `out` features: the stream is `out` wide after it (a
    multimodal projector)."""

    kind: Literal["linear"] = "linear"
    quantized: ClassVar[bool] = True
    out: Annotated[int, Arg(T.DIM), Field(description="output width: the stream's width after it")]
    bias: Annotated[bool, Arg(T.BOOL, True), Field(description="a bias")]
    act: Annotated[
        Activation | None,
        Arg(T.ACT, None),
        Field(description="an activation after it (LLaVA's projector: gelu)"),
    ]
    scope: ClassVar[str] = "linear"

    @property
    def width_out(self) -> int | None:
        return self.out


class Keep(_Op):
    """Keep `tokens` of the stream's tokens, dropping the rest (a tower's class token):
    a slice, no work of its own; the layers after it run over `tokens`."""

    kind: Literal["keep"] = "keep"
    tokens: Annotated[
        int,
        Arg(T.DIM),
        Field(
            description="tokens kept at the end of the stream (the others dropped, e.g. a "
            "class token)"
        ),
    ]
    scope: ClassVar[str] = "keep"
    fixes_length: ClassVar[str] = "token grid (its keep, pool or pixel shuffle)"

    def tokens_out(self, n: int) -> int:
        """The stream's token count after it, from `n` before."""
        if self.tokens > n:
            raise CheckFailure("tokens", f"`keep` keeps {self.tokens} of the stream's {n} "
                               "tokens", f"keep at most {n}")  # fmt: skip
        return self.tokens


class Pool(_Op):
    """2-D average pooling over the stream's square token grid, kernel = stride =
    `kernel`: kernel² times fewer tokens (Gemma 3's 4,096 patches to 256)."""

    kind: Literal["pool"] = "pool"
    kernel: Annotated[
        int, Arg(T.DIM), Field(description="side of the square of grid tokens averaged into one")
    ]
    scope: ClassVar[str] = "pool"
    fixes_length: ClassVar[str] = "token grid (its keep, pool or pixel shuffle)"

    def tokens_out(self, n: int) -> int:
        return _grid_tokens("pool", "kernel", n, self.kernel)


class PixelShuffle(_Op):
    """Each `factor` × `factor` square of neighbouring tokens of the grid merged into one
    token factor² times as wide (Llama 4's pixel shuffle, ratio 1/factor)."""

    kind: Literal["pixel_shuffle"] = "pixel_shuffle"
    factor: Annotated[
        int,
        Arg(T.DIM),
        Field(
            description="side of the square of grid tokens merged into one, factor² times as wide"
        ),
    ]
    scope: ClassVar[str] = "pixel_shuffle"
    fixes_length: ClassVar[str] = "token grid (its keep, pool or pixel shuffle)"

    def tokens_out(self, n: int) -> int:
        return _grid_tokens("pixel_shuffle", "factor", n, self.factor)

    @property
    def width_out(self) -> int | None:
        return self.dim * self.factor * self.factor


def _grid_tokens(kind: str, arg: str, n: int, k: int) -> int:
    """Tokens after merging each k × k square of a square grid of `n` tokens."""
    side = math.isqrt(n)
    if side * side != n or side % k:
        raise CheckFailure(
            arg,
            f"`{kind}` needs a square grid of tokens whose side divides by {k}; the stream "
            f"has {n} tokens",
            "drop a class token first: keep(N)" if math.isqrt(n - 1) ** 2 == n - 1 else None,
        )
    return (side // k) ** 2


TOKEN_OPS = (Keep, Pool, PixelShuffle)  # they change a stream's token count


class MTPProjection(_Op):
    """DeepSeek-V3's multi-token-prediction input (§2.2): the next token's embedding and
    the previous depth's hidden state, each RMS-normalized, concatenated and projected
    from 2·dim back to dim (enorm, hnorm, eh_proj)."""

    kind: Literal["mtp_proj"] = "mtp_proj"
    quantized: ClassVar[bool] = True
    scope: ClassVar[str] = "mtp_proj"


class Residual(_Op):
    kind: Literal["residual"] = "residual"
    scope: ClassVar[str] = "residual"


class LMHead(_Op):
    kind: Literal["lm_head"] = "lm_head"
    vocab: Annotated[int, Arg(T.DIM), Field(description="vocabulary size: the logits' width")]
    tied: Annotated[
        bool,
        Arg(T.BOOL, False),
        Field(description="shares the embedding's table (no weights of its own)"),
    ]
    bias: Annotated[bool, Arg(T.BOOL, False), Field(description="a bias on the logits")]
    softcap: Annotated[
        float,
        Arg(T.NUMBER, 0.0),
        Field(description="final logit soft-capping value (Gemma 2); 0 = off"),
    ]
    scope: ClassVar[str] = "lm_head"


class Pooler(_Op):
    """BERT's pooler: a dense layer and tanh on each sequence's first (class) token."""

    kind: Literal["pooler"] = "pooler"
    bias: Annotated[bool, Arg(T.BOOL, True), Field(description="a bias on the dense layer")]
    scope: ClassVar[str] = "pooler"


class Classifier(_Op):
    """Classification head on the pooled (class-token) representation."""

    kind: Literal["classifier"] = "classifier"
    classes: Annotated[int, Arg(T.DIM), Field(description="output classes")]
    bias: Annotated[bool, Arg(T.BOOL, True), Field(description="a bias")]
    scope: ClassVar[str] = "classifier"


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
    | TokenTypeEmbedding
    | PatchEmbed
    | LayerNorm
    | RMSNorm
    | Attention
    | MLA
    | MLP
    | MoE
    | Mamba2
    | GatedDeltaNet
    | Linear
    | ConvStem
    | RelativePositionBias
    | CrossAttention
    | MTPProjection
    | Keep
    | Pool
    | PixelShuffle
    | Residual
    | LMHead
    | Pooler
    | Classifier
)
OP_TYPES: tuple[type[_Op], ...] = get_args(Op)  # the kinds, in the union's order


class Stream(IR):
    """Layers over another token stream than the model's main one: an encoder whose
    output the main stream cross-attends to (Whisper's audio, T5's source), a vision
    tower whose `joins` output tokens join the main sequence (LLaVA's image tokens), or an
    `auxiliary` module trained beside the model over its tokens and counted apart
    (DeepSeek-V3's multi-token prediction)."""

    kind: Literal["stream"] = "stream"
    name: str
    length: int  # tokens per sequence (0: the main sequence's, an auxiliary stream)
    joins: int = 0
    auxiliary: bool = False
    width: int = 0  # its output's width
    body: tuple[Statement, ...]


Statement = Annotated[Op | Repeat | Block | Stream, Field(discriminator="kind")]
ParamValue = bool | int | float | str


class Spec(IR):
    """A resolved model: its parameters, default dtypes and layer tree."""

    schema_version: int = SCHEMA_VERSION
    name: str
    title: str
    params: dict[str, ParamValue]
    dtypes: DtypePolicy
    body: tuple[Statement, ...]


def walk(
    nodes: tuple[Statement, ...],
    multiplicity: int = 1,
    *,
    streams: bool = True,
    auxiliary: bool = False,
) -> Iterator[tuple[Op, int]]:
    """Every op of a layer tree with how many times it occurs: the model's, its
    encoders' and towers' (unless `streams` is off: the main stream's alone); an
    auxiliary stream's (multi-token prediction) only when `auxiliary` is on."""
    for node in nodes:
        if isinstance(node, Repeat):
            yield from walk(node.body, multiplicity * node.count, streams=streams,
                            auxiliary=auxiliary)  # fmt: skip
        elif isinstance(node, Block):
            yield from walk(node.body, multiplicity, streams=streams, auxiliary=auxiliary)
        elif isinstance(node, Stream):
            if streams and (auxiliary or not node.auxiliary):
                yield from walk(node.body, multiplicity)
        else:
            yield node, multiplicity


def streams_of(spec: Spec) -> tuple[Stream, ...]:
    """The spec's streams besides the main one, in order."""
    return tuple(n for n in spec.body if isinstance(n, Stream))
