"""The built-in layer statements of the language: their arguments, types, defaults, checks.

Each entry says how a call such as `attention(64, kv_heads = 8)` binds to a Spec IR op.
The resolver does the binding; the checks here only look at bound values and name the
argument to blame, so the resolver can point at it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from . import spec as ir


class ArgType(Enum):
    DIM = "a positive integer"
    COUNT = "a non-negative integer"
    BOOL = "true or false"
    NUMBER = "a non-negative number"
    DTYPE = "a dtype"
    ACT = "an activation"
    ROUTER = "a router function"


@dataclass(frozen=True, slots=True)
class Ref:
    """A default taken from the scope the op is called in (e.g. `dim` ← `d_model`)."""

    name: str


@dataclass(frozen=True, slots=True)
class Derived:
    """A default computed from other bound arguments; `text` documents it."""

    text: str
    fn: Callable[[dict], object]


REQUIRED = object()


@dataclass(frozen=True, slots=True)
class ArgSpec:
    name: str
    type: ArgType
    default: object = REQUIRED


class CheckFailure(Exception):
    """Raised by a check: which argument is to blame, the message and a hint."""

    def __init__(self, arg: str, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.arg, self.message, self.hint = arg, message, hint


@dataclass(frozen=True, slots=True)
class OpSignature:
    name: str
    ir_type: type
    args: tuple[ArgSpec, ...]
    kv_cache: bool = False  # takes a kv_dtype override
    fixed: dict = field(default_factory=dict)  # IR fields set by the statement name
    check: Callable[[dict], None] | None = None

    def arg(self, name: str) -> ArgSpec | None:
        return next((a for a in self.args if a.name == name), None)


DIM = ArgSpec("dim", ArgType.DIM, Ref("d_model"))
DTYPE_ARGS = ("dtype", "weight_dtype", "act_dtype")


def _divides(small: str, big: str, values: dict, what: str) -> None:
    if values[big] % values[small]:
        raise CheckFailure(
            small,
            f"{small} = {values[small]} does not divide {big} = {values[big]}",
            what,
        )


def _check_attention(v: dict) -> None:
    if v["heads"] % v["kv_heads"]:
        raise CheckFailure(
            "kv_heads",
            f"kv_heads = {v['kv_heads']} does not divide heads = {v['heads']}",
            "each KV head serves a whole group of query heads (GQA)",
        )


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


def _check_mamba2(v: dict) -> None:
    d_inner = v["expand"] * v["dim"]
    if d_inner % v["head_dim"]:
        raise CheckFailure(
            "head_dim",
            f"head_dim = {v['head_dim']} does not divide expand * dim = {d_inner}",
            "the SSD heads split the inner width evenly",
        )
    heads = d_inner // v["head_dim"]
    if heads % v["groups"]:
        raise CheckFailure(
            "groups",
            f"groups = {v['groups']} does not divide the {heads} SSD heads",
            "B and C are shared by heads/groups heads each",
        )


def _check_patch(v: dict) -> None:
    _divides("patch", "image", v, "the image is cut into whole patches")


T = ArgType
SIGNATURES: dict[str, OpSignature] = {
    sig.name: sig
    for sig in (
        OpSignature("embed", ir.Embedding, (ArgSpec("vocab", T.DIM), DIM)),
        OpSignature("pos_embed", ir.PositionEmbedding, (ArgSpec("positions", T.DIM), DIM)),
        OpSignature(
            "patch_embed",
            ir.PatchEmbed,
            (
                ArgSpec("patch", T.DIM),
                ArgSpec("image", T.DIM),
                ArgSpec("channels", T.DIM, 3),
                ArgSpec("bias", T.BOOL, True),
                ArgSpec("cls_token", T.BOOL, True),
                DIM,
            ),
            check=_check_patch,
        ),
        OpSignature(
            "layernorm",
            ir.Norm,
            (ArgSpec("bias", T.BOOL, True), DIM),
            fixed={"kind": "layernorm"},
        ),
        OpSignature("rmsnorm", ir.Norm, (DIM,), fixed={"kind": "rmsnorm"}),
        OpSignature(
            "attention",
            ir.Attention,
            (
                ArgSpec("heads", T.DIM),
                ArgSpec("kv_heads", T.DIM, Derived("heads", lambda v: v["heads"])),
                ArgSpec("head_dim", T.DIM, Derived("dim / heads", _default_head_dim)),
                ArgSpec("qkv_bias", T.BOOL, False),
                ArgSpec("out_bias", T.BOOL, False),
                ArgSpec("fused_qkv", T.BOOL, False),
                ArgSpec("qk_norm", T.BOOL, False),
                ArgSpec("rope", T.BOOL, True),
                ArgSpec("window", T.COUNT, 0),
                ArgSpec("softcap", T.NUMBER, 0.0),
                ArgSpec("sinks", T.BOOL, False),
                ArgSpec("causal", T.BOOL, True),
                DIM,
            ),
            kv_cache=True,
            check=_check_attention,
        ),
        OpSignature(
            "mla",
            ir.MLA,
            (
                ArgSpec("heads", T.DIM),
                ArgSpec("kv_lora_rank", T.DIM),
                ArgSpec("qk_nope_head_dim", T.DIM),
                ArgSpec("qk_rope_head_dim", T.DIM),
                ArgSpec("v_head_dim", T.DIM),
                ArgSpec("q_lora_rank", T.COUNT, 0),
                ArgSpec("causal", T.BOOL, True),
                DIM,
            ),
            kv_cache=True,
        ),
        OpSignature(
            "mlp",
            ir.MLP,
            (
                ArgSpec("d_ff", T.DIM),
                ArgSpec("act", T.ACT, ir.Activation.swiglu),
                ArgSpec("bias", T.BOOL, False),
                ArgSpec("fused_gate_up", T.BOOL, False),
                DIM,
            ),
            check=_check_mlp,
        ),
        OpSignature(
            "moe",
            ir.MoE,
            (
                ArgSpec("experts", T.DIM),
                ArgSpec("top_k", T.DIM),
                ArgSpec("d_ff", T.DIM),
                ArgSpec("shared_experts", T.COUNT, 0),
                ArgSpec("shared_d_ff", T.DIM, Derived("d_ff", lambda v: v["d_ff"])),
                ArgSpec("act", T.ACT, ir.Activation.swiglu),
                ArgSpec("bias", T.BOOL, False),
                ArgSpec("router_bias", T.BOOL, False),
                ArgSpec("router", T.ROUTER, ir.Router.softmax),
                ArgSpec("groups", T.DIM, 1),
                ArgSpec("groups_kept", T.DIM, Derived("groups", lambda v: v["groups"])),
                ArgSpec("correction_bias", T.BOOL, False),
                DIM,
            ),
            check=_check_moe,
        ),
        OpSignature(
            "mamba2",
            ir.Mamba2,
            (
                ArgSpec("d_state", T.DIM, 128),
                ArgSpec("d_conv", T.DIM, 4),
                ArgSpec("expand", T.DIM, 2),
                ArgSpec("head_dim", T.DIM, 64),
                ArgSpec("groups", T.DIM, 1),
                ArgSpec("chunk", T.DIM, 256),
                ArgSpec("conv_bias", T.BOOL, True),
                ArgSpec("bias", T.BOOL, False),
                DIM,
            ),
            check=_check_mamba2,
        ),
        OpSignature("residual", ir.Residual, (DIM,)),
        OpSignature(
            "lm_head",
            ir.LMHead,
            (
                ArgSpec("vocab", T.DIM),
                ArgSpec("tied", T.BOOL, False),
                ArgSpec("bias", T.BOOL, False),
                ArgSpec("softcap", T.NUMBER, 0.0),
                DIM,
            ),
        ),
        OpSignature(
            "classifier",
            ir.Classifier,
            (ArgSpec("classes", T.DIM), ArgSpec("bias", T.BOOL, True), DIM),
        ),
    )
}


def argument_names(sig: OpSignature) -> list[str]:
    """Every keyword the statement accepts, dtype overrides included."""
    names = [a.name for a in sig.args] + list(DTYPE_ARGS)
    return [*names, "kv_dtype"] if sig.kv_cache else names
