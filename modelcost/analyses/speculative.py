"""Speculative decoding: what a draft proposes and how much of it the target keeps.

Each step a draft proposes k tokens per sequence (k decode passes of a draft model, or
of the target's own multi-token-prediction module) and the target verifies them in one
decode step of k + 1 new tokens per sequence. A step yields E tokens: with a per-token
acceptance a, E = (1 − a^(k+1)) / (1 − a) (Leviathan et al. 2023, "Fast Inference
from Transformers via Speculative Decoding", eq. 1; k + 1 at a = 1). Without an
acceptance, E is the published acceptance length of the draft's kind at that k
(specs/kernels/speculative.json, each with its source) and a is the one that gives it
under eq. 1. Serving (serving.py) costs the step and divides it by E.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from modelcost.base.errors import SpecError
from modelcost.base.record import Record
from modelcost.base.resources import kernel_table

if TYPE_CHECKING:  # the IR (pydantic) is imported where a spec is read: not for --help
    import modelcost.language.spec as ir

DraftKind = Literal["mtp", "model"]


def _data() -> dict[str, Any]:
    return kernel_table("speculative")


DEFAULT_DRAFT_TOKENS: int = _data()["default_tokens"]["value"]


def expected_tokens(acceptance: float, k: int) -> float:
    """E, the tokens a step yields when each of k proposed tokens is accepted with
    probability `acceptance` until the first rejection, plus the target's own:
    (1 − a^(k+1)) / (1 − a) (Leviathan et al. 2023, eq. 1)."""
    if acceptance == 1:
        return float(k + 1)
    return (1 - acceptance ** (k + 1)) / (1 - acceptance)


def implied_acceptance(accepted: float, k: int) -> float:
    """The per-token acceptance a for which expected_tokens(a, k) = `accepted` (1 <
    accepted ≤ k + 1; E rises with a, so a bisection to float precision finds it)."""
    lo, hi = 0.0, 1.0
    for _ in range(100):
        mid = (lo + hi) / 2
        if expected_tokens(mid, k) < accepted:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def published(kind: DraftKind, k: int) -> float | None:
    """The published acceptance length (tokens a step) of a draft of `kind` proposing
    k tokens, or None (a gap)."""
    lengths = _data()["drafts"][kind]["accepted_per_step"]
    return None if lengths is None else lengths.get(str(k))


def source(kind: DraftKind) -> str:
    said: str = _data()["drafts"][kind]["source"]
    return said


def cite(kind: DraftKind) -> str:
    """The source of a kind's published lengths, in a few words."""
    said: str = _data()["drafts"][kind]["cite"]
    return said


def kind_label(kind: DraftKind) -> str:
    said: str = _data()["drafts"][kind]["label"]
    return said


class Speculation(Record, frozen=True):
    """Speculative decoding as asked: `tokens` (k) proposed a step by `draft` (a draft
    model; None: the target's own multi-token-prediction module), each accepted with
    probability `acceptance` (None: the published acceptance length at k)."""

    tokens: int = DEFAULT_DRAFT_TOKENS
    acceptance: float | None = None
    draft: ir.Spec | None = None

    def __post_init__(self) -> None:
        k = self.tokens
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise ValueError(f"the draft proposes at least one token a step, got {k!r}")
        a = self.acceptance
        if a is not None and (isinstance(a, bool) or not isinstance(a, int | float)
                              or not 0 < a <= 1):  # fmt: skip
            raise ValueError(f"acceptance must be in (0, 1], got {a!r}")

    @property
    def kind(self) -> DraftKind:
        return "mtp" if self.draft is None else "model"


class Settled(Record, frozen=True):
    """A speculation's figures: k, a, E and where a (or E) came from."""

    tokens: int
    acceptance: float
    accepted_per_step: float
    source: str


def settle(s: Speculation) -> Settled:
    """k, a and E of `s`: from its acceptance by eq. 1, or the published length at k
    (SpecError where there is none)."""
    k = s.tokens
    if s.acceptance is not None:
        said = "a as given (--acceptance), E by Leviathan et al. 2023, eq. 1"
        return Settled(k, float(s.acceptance), expected_tokens(s.acceptance, k), said)
    length = published(s.kind, k)
    if length is None:
        raise SpecError(
            f"no published acceptance for {kind_label(s.kind)} proposing {k} token"
            f"{'s' if k > 1 else ''} a step ({source(s.kind)})",
            filename="modelcost",
            hint="give --acceptance A, the chance each proposed token is accepted, in (0, 1]",
        )
    said = f"E as published at k {k}: {cite(s.kind)} (specs/kernels/speculative.json)"
    return Settled(k, implied_acceptance(length, k), length, said)


def vocabulary(spec: ir.Spec) -> int | None:
    """The vocabulary of a spec's output head (its main stream's), if it has one."""
    import modelcost.language.spec as ir

    return next((op.vocab for op, _ in ir.walk(spec.body, streams=False)
                 if isinstance(op, ir.LMHead)), None)  # fmt: skip


def draft_spec(target: ir.Spec, s: Speculation) -> ir.Spec:
    """The spec whose decode step is one draft pass: the draft model, or the target's
    auxiliary (multi-token-prediction) stream as a model of its own (its embedding,
    projection, layer, norm and head: DeepSeek-V3's checkpoint holds its own copies of
    the embedding and head, counted as the spec writes them). SpecError for a draft
    whose vocabulary is not the target's, or a target without such a module."""
    from modelcost.language.spec import streams_of

    if s.draft is not None:
        mine, theirs = vocabulary(target), vocabulary(s.draft)
        if mine != theirs:
            raise SpecError(
                f"the draft `{s.draft.name}` has a vocabulary of {theirs or 'no'} tokens, the "
                f"target `{target.name}` one of {mine or 'no'}: the target cannot verify "
                "its proposals",
                filename="modelcost",
                hint="give a draft with the target's tokenizer (the same vocabulary)",
            )
        return s.draft
    aux = [st for st in streams_of(target) if st.auxiliary]
    if not aux:
        raise SpecError(
            f"`{target.name}` has no multi-token-prediction module (an auxiliary stream) "
            "to draft with",
            filename="modelcost",
            hint="give a draft model: --draft FILE.model",
        )
    st = aux[0]
    return target.model_copy(update={"name": f"{target.name}.{st.name}",
                                     "title": f"{target.title} {st.name} module",
                                     "body": st.body})  # fmt: skip
