"""Parameter counting: total and active (per-token) parameters of a Spec, by component.

Counts every weight, bias and norm scale the reference implementations allocate.
"Active" counts what one token touches: for MoE, top_k routed experts plus the shared
experts and the router, instead of all experts.
"""

from __future__ import annotations

from pydantic import Field

import modelcost.language.spec as ir
from modelcost.base.frozen import Frozen
from modelcost.base.memo import per_object
from modelcost.kinds.registry import room
from modelcost.kinds.room import Component


class ParamCount(Frozen):
    model: str
    total: int
    active: int
    components: dict[Component, int]
    active_components: dict[Component, int]
    # each named stream's parameters (an encoder's, a vision tower's): in the total
    streams: dict[str, int] = Field(default_factory=dict)
    # an auxiliary stream's (multi-token prediction): counted apart, not in the total
    apart: dict[str, int] = Field(default_factory=dict)


def device_params(op: ir.Op, tp: int = 1, ep: int = 1, etp: int | None = None) -> tuple[int, int]:
    """(dense, expert) parameters of one op instance on one device of a layout with `tp`
    tensor-parallel and `ep` expert-parallel ranks, each expert's width over `etp` of
    them (default tp) (its room says how it splits); on one device, every parameter of
    the op. Counts every weight, bias and norm scale the reference implementation
    allocates."""
    r = room(op)
    dense, experts = r.params(op, tp, ep)
    if etp is not None and etp != tp:  # the experts split as a tp of etp would split them
        experts = r.params(op, etp, ep)[1]
    return dense, experts


def op_params(op: ir.Op) -> tuple[Component, int, int]:
    """(component, total, active) parameters of one op instance: for MoE, a token
    touches top_k of the experts."""
    r = room(op)
    dense, experts = r.params(op, 1, 1)
    return r.component, dense + experts, r.active(op, dense, experts)


@per_object
def residual_width(spec: ir.Spec) -> int:
    """The residual stream's width: the first layer op's `dim`, what a layer takes in
    per token and a pipeline stage passes on."""
    return next((op.dim for op, _ in ir.walk(spec.body, streams=False)), 0)


@per_object
def count_params(spec: ir.Spec) -> ParamCount:
    """The model's parameters by component, total and active (computed once per spec)."""
    total: dict[Component, int] = dict.fromkeys(Component, 0)
    active: dict[Component, int] = dict.fromkeys(Component, 0)
    for op, times in ir.walk(spec.body):
        component, n, n_active = op_params(op)
        total[component] += n * times
        active[component] += n_active * times
    present = [c for c in Component if total[c]]
    named: dict[str, int] = {}
    apart: dict[str, int] = {}
    for stream in ir.streams_of(spec):
        n = sum(op_params(op)[1] * times for op, times in ir.walk(stream.body))
        (apart if stream.auxiliary else named)[stream.name] = n
    return ParamCount(
        model=spec.name,
        total=sum(total.values()),
        active=sum(active.values()),
        components={c: total[c] for c in present},
        active_components={c: active[c] for c in present},
        streams=named,
        apart=apart,
    )
