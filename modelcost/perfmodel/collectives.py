"""Collectives over a group of n devices, as bytes each device sends (ring algorithms).

For a tensor of S elements: all-reduce sends 2·(n−1)/n·S, all-gather (S = the gathered
output) and reduce-scatter (S = the input) (n−1)/n·S, all-to-all (n−1)/n·S, a p2p send
(pipeline stages, group 2) S. Reducing collectives also add (n−1)/n·S elements. Their
time on the links is network.py's.
"""

from __future__ import annotations

from fractions import Fraction
from typing import ClassVar, Literal

from ..dtypes import DType
from .base import Number, OpRecord, Unit, bpe

CollectiveKind = Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "p2p"]
_BACKWARD: dict[str, CollectiveKind] = {
    "all_reduce": "all_reduce",
    "all_gather": "reduce_scatter",
    "reduce_scatter": "all_gather",
    "all_to_all": "all_to_all",
    "p2p": "p2p",  # activations forward, their gradients back
}


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

    def describe(self) -> str:
        return f"{self.collective} {self.elements:,} × {self.group}"

    def _share(self) -> Fraction:
        return Fraction(self.group - 1, self.group)

    def flops(self) -> Number:
        if self.collective in ("all_reduce", "reduce_scatter"):
            return _number(self._share() * self.elements)
        return 0

    def bytes(self) -> Number:
        if self.collective == "p2p":  # one send of the whole tensor to the next rank
            return _number(self.elements * Fraction(bpe(self.dtype)))
        steps = 2 if self.collective == "all_reduce" else 1
        return _number(steps * self._share() * self.elements * Fraction(bpe(self.dtype)))

    def backward_op(self) -> CollectiveOp:
        """The collective the backward pass runs (an all-gather's is a reduce-scatter)."""
        return CollectiveOp(
            _BACKWARD[self.collective], self.elements, self.group, self.dtype, self.stride
        )

    def flops_bwd(self) -> Number:
        return self.backward_op().flops()

    def bytes_bwd(self) -> Number:
        return self.backward_op().bytes()
