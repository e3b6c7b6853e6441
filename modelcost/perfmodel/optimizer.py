"""The optimizer step's memory traffic and arithmetic (AdamW), once per training step."""

from __future__ import annotations

from typing import ClassVar

from modelcost.base.dtypes import DType

from .base import Number, OpRecord, Unit, bpe

# Per parameter: m = β1·m + (1−β1)·g (3); v = β2·v + (1−β2)·g² (4);
# denom = sqrt(v)/sqrt(bc2) + eps (3); decoupled decay p −= lr·wd·p (2);
# p −= step·m/denom (3). Bias corrections are per-step scalars.
ADAMW_FLOPS_PER_PARAM = 15


class AdamStepOp(OpRecord, frozen=True):
    """AdamW over `params` parameters: read grad, m, v (and the fp32 master copy when
    training in mixed precision), write m, v, the master copy and the parameters."""

    kind: ClassVar[str] = "Optimizer"
    unit: ClassVar[Unit] = Unit.vector

    params: int
    weight: DType = DType.bf16
    grad: DType = DType.bf16
    state: DType = DType.fp32
    master_weights: bool = True

    @property
    def precision(self) -> str:
        return "fp32"

    def flops(self) -> Number:
        return ADAMW_FLOPS_PER_PARAM * self.params

    def bytes(self) -> Number:
        per = bpe(self.grad) + 4 * bpe(self.state)  # grad in; m, v in and out
        if self.master_weights:
            per += 2 * 4 + bpe(self.weight)  # fp32 master in and out; working copy out
        else:
            per += 2 * bpe(self.weight)  # parameters in and out
        return self.params * per

    def flops_bwd(self) -> Number:
        raise ValueError("the optimizer step has no backward pass")

    bytes_bwd = flops_bwd
