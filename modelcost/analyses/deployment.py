"""Aggregated or disaggregated: within a device budget, the best aggregated layout and
the best pair of prefill and decode pools, the one the objective chooses, and one
Pareto front over both.

`serve --search --devices N` asks the question NVIDIA AIConfigurator answers when it
compares its "agg" and "disagg" modes for a GPU budget: serving.search tries the
aggregated layouts of at most N devices (tp, ep over tp × dp, pipelines), and
disagg.search_disagg the pairs of pools within N; each picks its best by the objective
(serving.choice_key), and the same key chooses between the two. Every point either
search tried (an aggregated layout along its curve; a pair of pools at its decode
concurrency) goes on one front of output tokens/s per user against per device, the
chart TensorRT-LLM's disaggregated-serving blog draws for the comparison.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

import modelcost.language.spec as ir
from modelcost.base.errors import SpecError
from modelcost.base.frozen import Frozen
from modelcost.base.hooks import shown
from modelcost.base.record import replace
from modelcost.base.settings import (
    DEFAULT_OBJECTIVE,
    DEFAULT_SERVE_ESTIMATE,
    EstimateMode,
    Objective,
)
from modelcost.base.tabular import Tabular
from modelcost.roofline.compile import as_hardware, as_spec
from modelcost.targets.hardware import Hardware

from .disagg import Disaggregated, DisaggSearch, search_disagg
from .serving_records import STATIC, Engine, Serving
from .serving_search import FrontPoint, Search, choice_key, pareto_front, search

if TYPE_CHECKING:
    from modelcost.estimate.calibration import Calibration

Mode = Literal["aggregated", "disaggregated"]


class DeploymentPoint(FrontPoint):
    """One point either search tried, on the joint front (`front`: of every point of
    both modes): an aggregated layout at a concurrency on its curve, or a pair of pools
    at its decode concurrency (sequences a decode replica runs)."""

    mode: Mode


class Deployment(Tabular, Frozen):
    """Both searches within one device budget and the mode `objective` chose. As rows:
    one per point of the joint front."""

    model: str
    model_title: str  # the spec's title, as compile's header says it
    hardware: str
    hardware_title: str  # the target's title, as compile's header says it
    isl: int
    osl: int
    devices: int  # the budget
    objective: Objective
    aggregated: Search | None  # None where no aggregated layout runs the model
    disaggregated: DisaggSearch | None  # None where no pair of pools does
    refused: tuple[str, ...]  # why a mode has no answer
    chosen: Mode | None
    points: tuple[DeploymentPoint, ...]
    why: str = ""

    @property
    def best_aggregated(self) -> Serving | None:
        return self.aggregated.chosen if self.aggregated is not None else None

    @property
    def best_disaggregated(self) -> Disaggregated | None:
        return self.disaggregated.chosen if self.disaggregated is not None else None

    def records(self) -> list[dict]:
        return [p.model_dump() for p in self.points]

    def _repr_html_(self) -> str:
        return shown(self, "html")


def pools_label(d: Disaggregated) -> str:
    """`prefill 1 × tp 4, decode 2 × tp 2, dp 4, ep 8`."""
    return (f"prefill {d.prefill.count} × {d.prefill.layout}, "
            f"decode {d.decode.count} × {d.decode.layout}")  # fmt: skip


def _points(agg: Search | None, dis: DisaggSearch | None, chosen: Mode | None,
            ) -> tuple[DeploymentPoint, ...]:  # fmt: skip
    rows: list[dict] = []
    for p in agg.points if agg is not None else ():
        rows.append(p.model_dump() | {"mode": "aggregated",
                                      "chosen": p.chosen and chosen == "aggregated"})  # fmt: skip
    for d in dis.tried if dis is not None else ():
        rows.append({
            "mode": "disaggregated", "layout": pools_label(d), "devices": d.devices,
            "concurrency": d.decode.batch, "ttft_s": d.ttft_s, "tpot_s": d.tpot_s,
            "output_tokens_per_s_user": 1 / d.tpot_s,
            "output_tokens_per_s_device": d.output_tokens_per_s_device,
            "meets_targets": d.meets_targets,
            "chosen": chosen == "disaggregated" and dis is not None and d == dis.chosen,
        })  # fmt: skip
    front = pareto_front([(r["output_tokens_per_s_user"], r["output_tokens_per_s_device"])
                          for r in rows])  # fmt: skip
    return tuple(DeploymentPoint.trusted(**(r | {"front": on}))
                 for r, on in zip(rows, front, strict=True))  # fmt: skip


def search_deployment(
    spec: ir.Spec | str | Path,
    hw: Hardware | str | Path,
    isl: int,
    osl: int,
    devices: int,
    tpot: float | None = None,
    ttft: float | None = None,
    engine: Engine = STATIC,
    estimate: EstimateMode = DEFAULT_SERVE_ESTIMATE,
    calibration: Calibration | None = None,
    objective: Objective = DEFAULT_OBJECTIVE,
    moe_imbalance: float | None = None,
) -> Deployment:
    """The aggregated layouts of at most `devices` devices and the pairs of pools within
    them, each search's best by `objective`, and the better of the two by the same key
    (serving.choice_key). A mode that cannot answer (no layout runs the model; fewer
    than 2 devices for two pools) is said in `refused`; SpecError when neither can. An
    engine's prefill budget (in-flight batching with chunked prefill) is the aggregated
    layouts' alone: the prefill pool runs whole prompts, the decode pool no prefill."""
    spec, hw = as_spec(spec), as_hardware(hw)
    refused: list[str] = []
    agg: Search | None = None
    dis: DisaggSearch | None = None
    try:
        agg = search(spec, hw, isl, osl, tpot, ttft, engine, estimate=estimate,
                     calibration=calibration, objective=objective,
                     moe_imbalance=moe_imbalance, max_devices=devices)  # fmt: skip
    except SpecError as err:
        refused.append(f"aggregated: {err.message}" + (f" ({err.hint})" if err.hint else ""))
    if devices < 2:
        refused.append("disaggregated: two pools need 2 devices at least")
    else:
        try:
            dis = search_disagg(spec, hw, isl, osl, devices, tpot, ttft,
                                replace(engine, budget=0), estimate, calibration,
                                moe_imbalance, objective)  # fmt: skip
        except SpecError as err:
            refused.append(f"disaggregated: {err.message}")
    if agg is None and dis is None:
        raise SpecError(f"neither an aggregated layout nor a pair of pools runs {spec.name} "
                        f"on {hw.title} within {devices:,} devices", filename="modelcost",
                        hint="; ".join(refused))  # fmt: skip
    best: list[tuple[tuple[float, ...], Mode]] = []
    if agg is not None and agg.chosen is not None:
        best.append((choice_key(objective, agg.chosen), "aggregated"))
    if dis is not None and dis.chosen is not None:
        best.append((choice_key(objective, dis.chosen), "disaggregated"))
    chosen: Mode | None = min(best)[1] if best else None
    return Deployment.trusted(
        model=spec.name, model_title=spec.title, hardware=hw.name,
        hardware_title=hw.title, isl=isl, osl=osl, devices=devices,
        objective=objective, aggregated=agg, disaggregated=dis, refused=tuple(refused),
        chosen=chosen, points=_points(agg, dis, chosen),
        why="" if chosen else "neither an aggregated layout nor a pair of pools meets "
                              "the targets",
    )  # fmt: skip
