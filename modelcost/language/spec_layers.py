"""The Spec IR's other layers, a class each declaring its statement: embeddings and
position, norms, projections and token reshaping, the residual, heads and poolers.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Annotated, ClassVar, Literal

from pydantic import Field

from .spec_base import Activation, T, _check_patch, _Op
from .vocabulary import Arg, CheckFailure


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
