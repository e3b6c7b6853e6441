"""Published kernel measurements against the roofline and the kernel-aware estimate.

A measurement file (tests/data/measured-kernels.json is one) lists GEMMs (M, N, K, the
precision, TFLOPS at 2·M·N·K or bytes/s over the unique bytes), attention kernels
(batch, query and key lengths, heads, head dim, causal, pass, time) and bandwidth
kernels (bytes/s). Each point becomes the op the compiler would build, costed and
timed like any other: its roofline time must not be beaten, and the estimate's error
is measured against it. A point whose `built` names the figures it was taken into (a
library rate, a part's achievable roof) is in-sample: the estimate gives it back by
construction, so it pins that figure and says nothing of the estimate's accuracy.
"""

from __future__ import annotations

import json
from pathlib import Path

from modelcost.base.dtypes import DType
from modelcost.base.files import read_text
from modelcost.base.record import Record
from modelcost.perfmodel import GemmOp, OpRecord, SdpaOp
from modelcost.targets.hardware import Hardware, load_hardware
from modelcost.targets.roofs import roof

from .estimate import estimate
from .kernel_rates import sustained_bandwidth

DTYPE = {"fp32": DType.fp32, "bf16": DType.bf16, "fp16": DType.fp16, "fp8": DType.fp8_e4m3,
         "fp6": DType.fp6_e2m3, "fp4": DType.fp4}  # fmt: skip
GIGABYTE = 1e9  # what a bandwidth point moves, for a time to compare


class Check(Record, frozen=True):
    id: int
    kind: str
    hardware: str
    what: str
    measured_s: float
    roofline_s: float
    estimate_s: float
    reason: str
    built: tuple[str, ...] = ()  # the model's figures taken from this point, if any

    @property
    def in_sample(self) -> bool:
        """Whether the model was built from this point (then it is no validation)."""
        return bool(self.built)

    @property
    def error(self) -> float:
        """The estimate's relative error: estimate / measured − 1."""
        return self.estimate_s / self.measured_s - 1

    @property
    def beaten(self) -> bool:
        """Whether the measurement beat the roofline (it must not)."""
        return self.measured_s < self.roofline_s * (1 - 1e-9)


def _timed(op: OpRecord, hw: Hardware, pass_: str = "fwd") -> tuple[float, float, str]:
    """(roofline time, estimated time, reason) of one pass of `op`."""
    if pass_ == "bwd":
        flops, nbytes = op.flops_bwd(), op.bytes_bwd()
    else:
        flops, nbytes = op.flops(), op.bytes()
    r = roof(op.unit, op.precision, hw, "datasheet", "datasheet")
    roofline = max(flops / r.peak_flops, nbytes / r.bytes_per_s)
    e = estimate(op, flops, nbytes, roofline, hw, pass_)
    return roofline, e.time_s, e.reason


def check(point: dict) -> Check:
    """One published point against the model."""
    hw = load_hardware(point["hardware"])
    kind = point["kind"]
    if kind == "gemm":
        dt = DTYPE[point["precision"]]
        op: OpRecord = GemmOp(point["M"], point["N"], point["K"], a=dt, b=dt, out=DType.bf16,
                              bias_dtype=DType.bf16)  # fmt: skip
        roofline, est, why = _timed(op, hw)
        if "tflops" in point:
            measured = 2 * point["M"] * point["N"] * point["K"] / (point["tflops"] * 1e12)
        else:
            measured = op.bytes() / point["unique_bytes_per_s"]
        what = f"{point['M']}×{point['N']}×{point['K']} {point['precision']}"
    elif kind == "attention":
        dt = DTYPE[point["precision"]]
        op = SdpaOp(point["B"], point["S_q"], point["H_q"], point["S_kv"], point["H_kv"],
                    point["d"], point["d"], causal=point["causal"], act=dt, kv=dt)  # fmt: skip
        roofline, est, why = _timed(op, hw, point["pass_"])
        measured = point["time_ms"] * 1e-3
        causal = "causal" if point["causal"] else "full"
        what = (f"B={point['B']} S={point['S_q']} H={point['H_q']}/{point['H_kv']} "
                f"d={point['d']} {causal} {point['pass_']}")  # fmt: skip
    else:  # a STREAM-style kernel: a gigabyte at its bandwidth
        measured = GIGABYTE / point["bytes_per_s"]
        roofline = GIGABYTE / hw.bandwidth("datasheet")
        bw = sustained_bandwidth(hw)
        est = GIGABYTE / bw.bytes_s
        why, what = bw.source, str(point.get("benchmark"))
    return Check(point["id"], kind, hw.name, what, measured, roofline, est, why,
                 tuple(point.get("built", ())))  # fmt: skip


def load_points(path: str | Path) -> list[dict]:
    """The `points` of a measurement file (a missing or unreadable file is a SpecError)."""
    return json.loads(read_text(path))["points"]
