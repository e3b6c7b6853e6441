"""Collectives over a group of n devices, as bytes each device sends (ring algorithms).

For a tensor of S elements: all-reduce sends 2·(n−1)/n·S, all-gather (S = the gathered
output) and reduce-scatter (S = the input) (n−1)/n·S, all-to-all (n−1)/n·S, a p2p send
(pipeline stages, group 2) S. Reducing collectives also add (n−1)/n·S elements. Their
time on the links is network.py's.

A MoE token exchange (an all-to-all with a `Fanout`) holds S = rows × top_k copies, but
a row travels once to each rank holding one of its experts, not once per expert
(DeepEP's dispatch and combine, TensorRT-LLM's MNNVL all-to-all): (n − 1) · P(a rank is
hit) rows leave a rank, P from the routing (`Fanout.hit`).
"""

from __future__ import annotations

from fractions import Fraction
from math import comb
from typing import ClassVar, Literal

from modelcost.base.dtypes import DType
from modelcost.base.record import Record

from .base import Number, OpRecord, Unit, bpe

CollectiveKind = Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "p2p"]
_BACKWARD: dict[str, CollectiveKind] = {
    "all_reduce": "all_reduce",
    "all_gather": "reduce_scatter",
    "reduce_scatter": "all_gather",
    "all_to_all": "all_to_all",
    "p2p": "p2p",  # activations forward, their gradients back
}


class Fanout(Record, frozen=True):
    """How a MoE token exchange routes its rows: each to its top_k of `experts` experts,
    within `groups_kept` of `groups` expert groups (group-limited routing; DeepSeek-V3's
    topk_group of n_group), the experts split over the ranks in equal, contiguous
    slices (rank r holds experts [r·E/n, (r + 1)·E/n))."""

    experts: int
    top_k: int
    groups: int = 1
    groups_kept: int = 1

    def hit(self, parts: int) -> float:
        """The chance that one of `parts` equal, contiguous slices of the experts holds at
        least one of a row's top_k, routing uniform within the kept groups (each kept
        group set equally likely, the top_k drawn without replacement from its experts).

        With the G groups whole in the slices (parts divides G) a slice holds G/parts
        groups, m of them kept with hypergeometric chance C(G/p, m)·C(G − G/p, g − m)/
        C(G, g), and then misses every pick with C((g − m)·E/G, k) / C(g·E/G, k); with the
        slices inside groups (G divides parts) a slice is hit when its group is kept
        (g/G) and a pick lands in it: 1 − C(g·E/G − E/p, k)/C(g·E/G, k). Without groups
        (G = 1) both read 1 − C(E − E/p, k)/C(E, k); other splits are taken without
        the group limit (more slices hit: more traffic, never less)."""
        E, k, G, g = self.experts, self.top_k, self.groups, self.groups_kept
        if parts <= 1:
            return 1.0
        per = E // parts  # experts a slice holds
        if G > 1 and G % parts == 0:
            whole, pool = G // parts, g * E // G
            miss = sum(
                comb(whole, m) * comb(G - whole, g - m) / comb(G, g)
                * comb(pool - m * E // G, k) / comb(pool, k)
                for m in range(min(whole, g) + 1)
            )  # fmt: skip
            return 1 - miss
        if G > 1 and parts % G == 0:
            pool = g * E // G
            return g / G * (1 - comb(pool - per, k) / comb(pool, k))
        return 1 - comb(E - per, k) / comb(E, k)


def _number(x: Fraction) -> Number:
    return int(x) if x.denominator == 1 else float(x)


class CollectiveOp(OpRecord, frozen=True):
    kind: ClassVar[str] = "Collective"
    unit: ClassVar[Unit] = Unit.network

    collective: CollectiveKind
    elements: int
    group: int
    dtype: DType = DType.bf16
    # the distance between the group's ranks in the device numbering (tp-innermost: 1
    # for a tensor-parallel group, tp for a data- or expert-parallel one): with the
    # hardware's scale-up domain it says which links the collective crosses
    stride: int = 1
    # an all-to-all moving MoE tokens: `elements` counts every (row, expert) copy, and a
    # row travels once to each rank holding its experts (network.exchange)
    fanout: Fanout | None = None

    optional: ClassVar[tuple[str, ...]] = ("fanout",)

    def describe(self) -> str:
        return f"{self.collective} {self.elements:,} × {self.group}"

    def shape(self) -> dict[str, object]:
        """The base's shape, a token exchange's routing flattened into it."""
        out = super().shape()
        if (f := out.pop("fanout", None)) is not None:
            assert isinstance(f, Fanout)  # the field's type
            out |= {"routed_experts": f.experts, "top_k": f.top_k, "expert_groups": f.groups,
                    "groups_kept": f.groups_kept}  # fmt: skip
        return out

    def _share(self) -> Fraction:
        return Fraction(self.group - 1, self.group)

    def flops(self) -> Number:
        if self.collective in ("all_reduce", "reduce_scatter"):
            return _number(self._share() * self.elements)
        return 0

    def per_copy(self) -> CollectiveOp:
        """The exchange as an all-to-all of every (row, expert) copy, as NCCL's
        all-to-all (Megatron's dispatcher, DeepEP's low-latency kernels) sends them."""
        return CollectiveOp(self.collective, self.elements, self.group, self.dtype, self.stride)

    def bytes(self) -> Number:
        if self.collective == "p2p":  # one send of the whole tensor to the next rank
            return _number(self.elements * Fraction(bpe(self.dtype)))
        if self.fanout is not None:  # each row once to each other rank holding its experts
            f = self.fanout
            return (self.group - 1) * f.hit(self.group) * self.elements / f.top_k * bpe(self.dtype)
        steps = 2 if self.collective == "all_reduce" else 1
        return _number(steps * self._share() * self.elements * Fraction(bpe(self.dtype)))

    def backward_reads_inputs(self) -> bool:
        # an all-gather's input (a sequence-parallel shard) is kept to gather again for
        # the backward's weight gradients, the gathered tensor is not (Korthikanti et al.
        # 2022, section 4.2.2); every other collective's backward moves gradients alone
        return self.collective == "all_gather"

    def backward_op(self) -> CollectiveOp:
        """The collective the backward pass runs (an all-gather's is a reduce-scatter)."""
        return CollectiveOp(
            _BACKWARD[self.collective],
            self.elements,
            self.group,
            self.dtype,
            self.stride,
            self.fanout,
        )

    def flops_bwd(self) -> Number:
        return self.backward_op().flops()

    def bytes_bwd(self) -> Number:
        return self.backward_op().bytes()
