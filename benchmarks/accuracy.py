"""The estimate and the bound against every published point the language can express.

    python benchmarks/accuracy.py [--write] [-v] [DATA]

DATA (benchmarks/data/measured-public.json) holds the project's reference measurements
verbatim, each end-to-end point with how it maps to `modelcost.serve` and each training
point to `modelcost.compile_report` (or why it cannot be expressed); kernel points map
by id to tests/data/measured-kernels.json, costed as benchmarks/estimate_error.py costs
them. Every point is scored through the public API
(`modelcost.estimate.measured.check`, `modelcost.serve`), so the figures follow the estimate as
it changes.

For each point: the published figure, the kernel-aware estimate and the roofline (the
bound) of that figure; error = predicted / measured − 1 on the figure as published (a
time for kernels and latencies, tokens/s for throughputs). A measurement that beats its
bound (faster than the roofline) is listed first: the product promises that none does.

A point the model was built from (its `built` names the figures it was taken into: a
library rate, a part's achievable roof) is in-sample: the estimate gives it back by
construction. The summary counts out-of-sample points only; the in-sample ones are
listed apart, as the regression pins on their figures that they are.

`--write` regenerates docs/accuracy.md and docs/accuracy.svg (log-log predicted vs
measured, one colour per group, the ±25 % band); `-v` lists every point. The page's
summary is the gate tests/test_accuracy_gate.py holds the estimate to: a change that
makes a group's out-of-sample share within ±25 % or its median |error| worse fails
until the page is regenerated with it (`regressions`).
"""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from math import log10
from pathlib import Path
from typing import Any, NamedTuple

from tabulate import tabulate

import modelcost
from modelcost.estimate.costing import costing
from modelcost.estimate.engines import DEFAULT_ENGINE, engine_label
from modelcost.estimate.measured import check, load_points
from modelcost.ir.graph import Parallel
from modelcost.render.charts import PALETTE
from modelcost.render.escape import md, xml

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "benchmarks" / "data" / "measured-public.json"
KERNELS = ROOT / "tests" / "data" / "measured-kernels.json"
MODELS = ROOT / "specs" / "models"
DOC, CHART = ROOT / "docs" / "accuracy.md", ROOT / "docs" / "accuracy.svg"

BAND = 0.25  # "within ±25 %" (issue 21's yardstick)
WORST = 10  # the worst points listed, by |estimate error|
KERNEL, SINGLE, MULTI = "kernel", "end to end, 1 GPU", "end to end, multi-GPU"
TRAINING = "training"
GROUPS = (KERNEL, SINGLE, MULTI, TRAINING)
E2E = "end to end, all"
TIMES = {"latency_s"}  # figures that are times (lower is faster); the rest are rates
HARDWARE = {"GB200 (B200-class)": "gb200"}  # the reference set's name → modelcost's
UNITS = {"output_tokens_per_s": "output tok/s", "output_tokens_per_s_device":
         "output tok/s/GPU", "total_tokens_per_s": "total tok/s", "latency_s": "s",
         "mfu": "MFU", "tokens_per_s_device": "tok/s/GPU"}  # fmt: skip


@dataclass(frozen=True)
class Scored:
    """One published point against the model's two figures for it."""

    id: int
    group: str
    hardware: str
    what: str
    unit: str
    measured: float
    estimate: float
    bound: float
    is_time: bool  # lower is faster (kernel times, latencies)
    reason: str
    built: tuple[str, ...] = ()  # the model's figures taken from this point: in-sample
    # a serving point's (vendor, model family, precision, engine): the page's clusters
    cluster: tuple[str, ...] = ()

    @property
    def in_sample(self) -> bool:
        return bool(self.built)

    @property
    def error(self) -> float:
        """The estimate's error on the figure as published: estimate / measured − 1."""
        return self.estimate / self.measured - 1

    @property
    def bound_error(self) -> float:
        return self.bound / self.measured - 1

    @property
    def beaten_by(self) -> float:
        """How far the measurement is past its bound (> 0: it beats the roofline)."""
        if self.is_time:
            return self.bound / self.measured - 1
        return self.measured / self.bound - 1


@dataclass(frozen=True)
class Skipped:
    id: int
    kind: str
    hardware: str
    why: str


def load(path: Path = DATA) -> list[dict]:
    return load_points(path)


def kernel_points(path: Path = KERNELS) -> tuple[dict[int, dict], dict[int, str]]:
    """The kernel points' op shapes by id, and why the others are excluded."""
    doc = json.loads(path.read_text())
    return ({p["id"]: p for p in doc["points"]},
            {e["id"]: e["why"] for e in doc.get("excluded", [])})  # fmt: skip


def _spec(m: dict, tmp: Path) -> Path:
    """The point's model: a shipped spec, or its precision variant through `extends`."""
    base = MODELS / f"{m['spec']}.model"
    if m["recipe"] is None and m["kv_dtype"] is None:
        return base
    name = modelcost.load_spec(base).name
    body = "".join(f"  {k} = {m[k]}\n" for k in ("recipe", "kv_dtype") if m[k] is not None)
    path = tmp / f"{m['spec']}-{m['recipe']}-{m['kv_dtype']}.model"
    path.write_text(f'import "{base}"\nmodel variant extends {name} {{\n{body}}}\n')
    return path


def _serve_figure(s: object, metric: str) -> tuple[float, float]:
    """(the estimate's figure, the bound's) of a `Serving` for one published metric."""
    return getattr(s, metric), getattr(s.bound, metric)  # type: ignore[attr-defined]


# the engine names the data's mappings use, as modelcost's engine model names them
ENGINE_NAMES = {"vllm": "vllm", "tensorrt-llm": "trtllm", "sglang": "sglang"}


def _serve(m: dict, tmp: Path, concurrency: int | None) -> Any:
    """`modelcost.serve` as a serving point's mapping says, at `concurrency`."""
    par = Parallel(tp=m["tp"], dp=m["dp"], ep=m["ep"])
    # the engine the point ran on (its mapping says; serve's default where it does not)
    engine = modelcost.Engine(name=ENGINE_NAMES.get(m.get("engine"), DEFAULT_ENGINE))
    return modelcost.serve(_spec(m, tmp), m["hardware"], m["isl"], m["osl"], par,
                           concurrency=concurrency, engine=engine,
                           estimate="kernels")  # fmt: skip


def score_e2e(p: dict, tmp: Path) -> Scored:
    """An end-to-end point through `modelcost.serve`, as its mapping says."""
    m = p["modelcost"]
    s = _serve(m, tmp, m["concurrency"])
    est, bound = _serve_figure(s, m["metric"])
    batch = f"batch {m['concurrency']}" if m["concurrency"] else ""
    what = " ".join(x for x in (p["model_or_shape"]["model"], m["recipe"] or "bf16", s.layout,
                                f"{m['isl']}/{m['osl']}", batch) if x)  # fmt: skip
    reason = (f"{s.engine}, concurrency {s.concurrency} ({s.concurrency_said}); "
              f"{m['note']}")  # fmt: skip
    group = SINGLE if s.devices == 1 else MULTI
    return Scored(p["id"], group, m["hardware"], what, UNITS[m["metric"]], m["measured"], est,
                  bound, m["metric"] in TIMES, reason, tuple(m.get("built", ())),
                  cluster_of(m))  # fmt: skip


def cluster_of(m: dict) -> tuple[str, str, str, str]:
    """A serving point's (vendor, model family, precision, engine), from its mapping:
    the part's maker (its hardware file's), dense or MoE (the spec's active parameters
    fewer than its total), the recipe the weights run in, the engine it ran on."""
    vendor = modelcost.load_hardware(m["hardware"]).vendor
    return vendor, _family(m["spec"]), m["recipe"] or "bf16", _engine_title(m["engine"])


@cache
def _family(spec: str) -> str:
    n = modelcost.count_params(modelcost.load_spec(MODELS / f"{spec}.model"))
    return "MoE" if n.active < n.total else "dense"


def _engine_title(name: str) -> str:
    """An engine as the data's mappings name it, by modelcost's engine model's label."""
    return engine_label(ENGINE_NAMES[name])


# the clusters the page breaks the serving points down by, in `Scored.cluster`'s order
DIMENSIONS = ("vendor", "model", "precision", "engine")


def score_training(p: dict, tmp: Path) -> Scored:
    """A training point through `modelcost.compile_report`, as its mapping says: the
    published MFU, or tokens/s per GPU, against the kernel-aware estimate's and the
    roofline's (MFU: model FLOPs over the step and the datasheet matrix peak, as the
    sources count it)."""
    m, t = p["modelcost"], p["modelcost"]["train"]
    layout = {k: t[k] for k in ("tp", "sp", "cp", "pp", "vpp", "dp", "microbatches", "zero")}
    layout["overlap"] = t.get("overlap", "none")  # as the run overlapped (its note says)
    layout["grads"] = t.get("grads", "fp32")  # and kept its gradients
    layout["ep"] = t.get("ep", 1)  # a MoE model's expert-parallel ranks
    layout["offload"] = t.get("offload", 0)  # layers whose activations went to the host
    w = modelcost.Workload("train", t["batch"], t["seq"], parallel=Parallel(**layout))
    spec = _spec({"spec": t["spec"], "recipe": t["recipe"], "kv_dtype": None}, tmp)
    # a capacity-padded run's experts each take the mean (moe_imbalance 1), else the
    # documented routing imbalance
    how = costing(estimate="kernels", moe_imbalance=t.get("moe_imbalance"))
    r = modelcost.compile_report(spec, t["hardware"], w, how=how)
    tot = r.totals
    assert tot.estimate_s is not None and tot.mfu_estimate is not None  # estimate="kernels"
    if m["metric"] == "mfu":
        est, bound = tot.mfu_estimate, tot.mfu_bound
    else:  # tokens/s per device: the bound's, at the estimate's step
        bound = tot.per_token.tokens_per_s_device
        est = bound * tot.time_s / tot.estimate_s
    what = (f"{p['model_or_shape']['model']} {t['recipe'] or 'bf16'} "
            f"{r.workload.layout.label}, seq {t['seq']:,}")  # fmt: skip
    fits = "" if tot.memory.fits else "; modelcost says it does not fit: "
    return Scored(p["id"], TRAINING, t["hardware"], what, UNITS[m["metric"]], m["measured"],
                  est, bound, False, f"{m['note']}{fits}{tot.memory.warning or ''}",
                  tuple(m.get("built", ())))  # fmt: skip


def score_kernel(shape: dict) -> Scored:
    c = check(shape)
    return Scored(c.id, KERNEL, c.hardware, f"{c.kind} {c.what}", "s", c.measured_s,
                  c.estimate_s, c.roofline_s, True, c.reason, c.built)  # fmt: skip


def score(points: Iterable[dict], kernels: tuple[dict[int, dict], dict[int, str]] | None = None
          ) -> tuple[list[Scored], list[Skipped]]:  # fmt: skip
    """Every point scored, or skipped with why; in the order given."""
    shapes, excluded = kernels if kernels is not None else kernel_points()
    scored: list[Scored] = []
    skipped: list[Skipped] = []
    with tempfile.TemporaryDirectory() as d:
        for p in points:
            hw = HARDWARE.get(p["hardware"], p["hardware"].lower())
            m = p.get("modelcost", {})
            if p["id"] in shapes:
                scored.append(score_kernel(shapes[p["id"]]))
            elif p["id"] in excluded:
                skipped.append(Skipped(p["id"], p["kind"], hw, excluded[p["id"]]))
            elif "skip" in m:
                skipped.append(Skipped(p["id"], p["kind"], hw, m["skip"]))
            elif "train" in m:
                scored.append(score_training(p, Path(d)))
            elif "metric" in m:
                scored.append(score_e2e(p, Path(d)))
            else:
                skipped.append(Skipped(p["id"], p["kind"], hw, "no mapping to a modelcost "
                                       "command is recorded for this point"))  # fmt: skip
    return scored, skipped


def within(errors: list[float]) -> int:
    return sum(abs(e) <= BAND for e in errors)


class Figures(NamedTuple):
    """A group's out-of-sample figures, as the summary prints and the gate reads them."""

    points: int
    within: int  # the estimate within ±25 %
    median: float  # the estimate's median |error|, to the 0.1 % the page prints


MEMBERS = {g: (g,) for g in GROUPS} | {E2E: (SINGLE, MULTI), "all": GROUPS}


def figures(scored: list[Scored]) -> dict[str, Figures]:
    """Each group's out-of-sample figures (the groups with such points), the page's order."""
    out: dict[str, Figures] = {}
    for group in (*GROUPS, E2E, "all"):
        errors = [c.error for c in scored if c.group in MEMBERS[group] and not c.in_sample]
        if errors:
            out[group] = _figures(errors)
    return out


def _figures(errors: list[float]) -> Figures:
    """The figures of some estimate errors (at least one)."""
    return Figures(len(errors), within(errors), round(statistics.median(map(abs, errors)), 3))


def _shown(f: Figures) -> list[object]:
    """A figures' points, share within ±25 % and median |error| as the tables print them."""
    return [f.points, f"{f.within}/{f.points} ({f.within / f.points:.0%})", f"{f.median:.1%}"]


def summary(scored: list[Scored]) -> list[list[object]]:
    """One row per group, one for every end-to-end point (the issue's serving target is
    on both groups together) and one for all: the out-of-sample points, the estimate's
    and the bound's share within ±25 % and median |error|, the measurements past the
    bound (of every point), and the in-sample points left out of the figures."""
    rows: list[list[object]] = []
    for group, f in figures(scored).items():
        every = [c for c in scored if c.group in MEMBERS[group]]
        cs = [c for c in every if not c.in_sample]
        bnd = [c.bound_error for c in cs]
        rows.append([group, *_shown(f),
                     f"{within(bnd)}/{f.points} ({within(bnd) / f.points:.0%})",
                     f"{statistics.median(abs(e) for e in bnd):.0%}",
                     sum(c.beaten_by > 1e-9 for c in every),
                     len(every) - len(cs)])  # fmt: skip
    return rows


def by_cluster(scored: list[Scored]) -> dict[str, list[list[object]]]:
    """The out-of-sample serving points by each dimension (`DIMENSIONS`): a row a
    value, in its first point's order, with the summary's figures."""
    serving = [c for c in scored if c.cluster and not c.in_sample]
    out: dict[str, list[list[object]]] = {}
    for i, dim in enumerate(DIMENSIONS):
        values = list(dict.fromkeys(c.cluster[i] for c in serving))
        rows = []
        for v in values:
            cs = [c for c in serving if c.cluster[i] == v]
            rows.append([v, *_shown(_figures([c.error for c in cs])),
                         sum(c.beaten_by > 1e-9 for c in cs)])  # fmt: skip
        out[dim] = rows
    return out


CLUSTER_HEADERS = ["points", "estimate within ±25 %", "estimate median |error|",
                   "bound beaten"]  # fmt: skip


SUMMARY_HEADERS = ["group", "points (out of sample)", "estimate within ±25 %",
                   "estimate median |error|", "bound within ±25 %", "bound median |error|",
                   "bound beaten (all points)", "in-sample, not counted"]  # fmt: skip


def published(page_text: str) -> dict[str, Figures]:
    """The figures a page written by `page` publishes in its summary table."""
    rows = page_text.split("## Summary", 1)[1].split("\n\n", 2)[1].splitlines()[2:]
    out: dict[str, Figures] = {}
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        points, within_ = int(cells[1]), int(cells[2].split("/")[0])
        out[cells[0]] = Figures(points, within_, float(cells[3].rstrip("%")) / 100)
    return out


def regressions(was: dict[str, Figures], now: dict[str, Figures]) -> list[str]:
    """Where `now` is worse than `was` (a page's published figures): a group whose
    out-of-sample share within ±25 % fell or whose median |error| rose, or that is gone.
    A group with other points (one added or dropped) is judged by its share."""
    worse = []
    for group, w in was.items():
        n = now.get(group)
        if n is None:
            worse.append(f"{group}: no out-of-sample point is scored any more")
            continue
        if n.within * w.points < w.within * n.points:
            worse.append(f"{group}: {n.within}/{n.points} within ±25 %, the page publishes "
                         f"{w.within}/{w.points}")  # fmt: skip
        if n.median > w.median + 1e-9:
            worse.append(f"{group}: median |error| {n.median:.1%}, the page publishes "
                         f"{w.median:.1%}")  # fmt: skip
    return worse


POINT_HEADERS = ["id", "group", "part", "what", "measured", "estimate", "error", "bound",
                 "bound error", "why"]  # fmt: skip


def _fig(x: float, unit: str) -> str:
    if unit == "MFU":
        return f"{x:.1%}"
    if unit == "s" and x < 1:
        return f"{x * 1e6:,.1f} µs" if x < 1e-3 else f"{x * 1e3:,.2f} ms"
    return f"{x:,.3g} {unit}" if x < 1000 else f"{x:,.0f} {unit}"


def point_rows(cs: Iterable[Scored]) -> list[list[object]]:
    return [[c.id, c.group, c.hardware, c.what, _fig(c.measured, c.unit),
             _fig(c.estimate, c.unit), f"{c.error:+.0%}", _fig(c.bound, c.unit),
             f"{c.bound_error:+.0%}", c.reason] for c in cs]  # fmt: skip


def worst(scored: list[Scored], n: int = WORST) -> list[Scored]:
    """The out-of-sample points with the largest |error|."""
    cs = (c for c in scored if not c.in_sample)
    return sorted(cs, key=lambda c: (-abs(c.error), c.id))[:n]


def beaten(scored: list[Scored]) -> list[Scored]:
    return sorted((c for c in scored if c.beaten_by > 1e-9), key=lambda c: -c.beaten_by)


def bound_line(scored: list[Scored]) -> str:
    past = beaten(scored)
    if not past:
        return f"No published measurement beats its roofline ({len(scored)} points)."
    most = past[0]
    return (f"**{len(past)} of {len(scored)} published measurements beat their roofline**, "
            f"the most by {most.beaten_by:.1%} (point {most.id}).")  # fmt: skip


# --- the chart ---------------------------------------------------------------------------

W, H, LEFT, RIGHT, TOP, BOTTOM = 760, 520, 70, 190, 20, 50


def chart_svg(scored: list[Scored]) -> str:
    """Predicted (the estimate) against measured, log-log, one colour per group, with the
    y = x line and the ±25 % band. Each point's figure is in its own unit (seconds for
    kernels and latencies, tokens/s for throughputs): the axes are log-scaled figures."""
    vals = [v for c in scored for v in (c.measured, c.estimate)]
    d0, d1 = int(log10(min(vals)) // 1), int(log10(max(vals)) // 1) + 1
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM

    def x(v: float) -> float:
        return LEFT + (log10(v) - d0) / (d1 - d0) * pw

    def y(v: float) -> float:
        return TOP + ph - (log10(v) - d0) / (d1 - d0) * ph

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
           f'viewBox="0 0 {W} {H}" role="img" aria-label="predicted against measured" '
           'font-family="Helvetica, Arial, sans-serif" font-size="11">',
           f'<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="#fff" '
           'stroke="#d8dce4"/>']  # fmt: skip
    lo, hi = 10.0**d0, 10.0**d1
    band = [(lo, lo * (1 + BAND)), (hi, hi * (1 + BAND)), (hi, hi * (1 - BAND)),
            (lo, lo * (1 - BAND))]  # fmt: skip
    pts = " ".join(f"{x(a):.1f},{y(min(max(b, lo), hi)):.1f}" for a, b in band)
    out.append(f'<polygon points="{pts}" fill="#1d2330" fill-opacity="0.08"/>')
    out.append(f'<line x1="{x(lo):.1f}" y1="{y(lo):.1f}" x2="{x(hi):.1f}" y2="{y(hi):.1f}" '
               'stroke="#5b6475" stroke-dasharray="4 3"/>')  # fmt: skip
    for d in range(d0, d1 + 1):
        label = f"1e{d}"
        out.append(
            f'<line x1="{x(10.0**d):.1f}" y1="{TOP + ph}" x2="{x(10.0**d):.1f}" '
            f'y2="{TOP + ph + 4}" stroke="#5b6475"/><text x="{x(10.0**d):.1f}" '
            f'y="{TOP + ph + 16}" text-anchor="middle" fill="#5b6475">{label}</text>'
        )
        out.append(f'<line x1="{LEFT - 4}" y1="{y(10.0**d):.1f}" x2="{LEFT}" '
                   f'y2="{y(10.0**d):.1f}" stroke="#5b6475"/><text x="{LEFT - 6}" '
                   f'y="{y(10.0**d) + 4:.1f}" text-anchor="end" fill="#5b6475">{label}'
                   "</text>")  # fmt: skip
    out.append(f'<text x="{LEFT + pw / 2:.0f}" y="{H - 12}" text-anchor="middle" '
               'fill="#1d2330">measured (s for kernels and latencies, tokens/s for '
               "throughputs)</text>")  # fmt: skip
    out.append(f'<text x="16" y="{TOP + ph / 2:.0f}" text-anchor="middle" fill="#1d2330" '
               f'transform="rotate(-90 16 {TOP + ph / 2:.0f})">predicted (the estimate)'
               "</text>")  # fmt: skip
    for i, group in enumerate(GROUPS):
        colour = PALETTE[i % len(PALETTE)]
        for c in (c for c in scored if c.group == group):
            tip = xml(f"{c.id} {c.hardware} {c.what}: measured {_fig(c.measured, c.unit)}, "
                      f"estimate {_fig(c.estimate, c.unit)} ({c.error:+.0%})")  # fmt: skip
            out.append(
                f'<circle cx="{x(c.measured):.1f}" cy="{y(c.estimate):.1f}" r="3.5" '
                f'fill="{colour}" fill-opacity="0.8"><title>{tip}</title></circle>'
            )
        ly = TOP + 14 + 18 * i
        out.append(
            f'<circle cx="{W - RIGHT + 16}" cy="{ly - 4}" r="4" fill="{colour}"/>'
            f'<text x="{W - RIGHT + 26}" y="{ly}" fill="#1d2330">{xml(group)}</text>'
        )
    ly = TOP + 14 + 18 * len(GROUPS)
    out.append(f'<rect x="{W - RIGHT + 10}" y="{ly - 9}" width="12" height="10" '
               f'fill="#1d2330" fill-opacity="0.08"/><text x="{W - RIGHT + 26}" y="{ly}" '
               'fill="#1d2330">±25 % of measured</text>')  # fmt: skip
    out.append("</svg>")
    return "\n".join(out) + "\n"


# --- curves against published ones --------------------------------------------------------

# what makes published serving points one curve: all of their mapping but the concurrency
SERIES_KEY = ("spec", "recipe", "kv_dtype", "hardware", "engine", "tp", "dp", "ep", "isl",
              "osl", "metric")  # fmt: skip


def series(points: Iterable[dict]) -> list[tuple[dict, ...]]:
    """Published serving points of one configuration at two or more concurrencies (a
    curve each), in concurrency order; the curves in their first point's order. A
    point at the engine's own load (no concurrency) or skipped is on none."""
    groups: dict[tuple, list[dict]] = {}
    for p in points:
        m = p.get("modelcost", {})
        if "metric" in m and "train" not in m and "skip" not in m and m.get("concurrency"):
            groups.setdefault(tuple(m[k] for k in SERIES_KEY), []).append(p)
    out = []
    for ps in groups.values():
        if len({p["modelcost"]["concurrency"] for p in ps}) > 1:
            out.append(tuple(sorted(ps, key=lambda p: (p["modelcost"]["concurrency"], p["id"]))))
    return out


class Curve(NamedTuple):
    """A published series beside the estimate and the bound: the measured (concurrency,
    figure, id)s, and the predicted (concurrency, estimate, bound) at each measured
    concurrency and every power of two between."""

    title: str
    unit: str
    sources: tuple[str, ...]
    measured: tuple[tuple[int, float, int], ...]
    predicted: tuple[tuple[int, float, float], ...]

    @property
    def name(self) -> str:
        """Its chart's file name, after its first point."""
        return f"accuracy-curve-{self.measured[0][2]}.svg"


def curve(ps: tuple[dict, ...], tmp: Path) -> Curve:
    """One series' curve: `serve` at each concurrency, as each point's score calls it."""
    m = ps[0]["modelcost"]
    measured = tuple((p["modelcost"]["concurrency"], p["modelcost"]["measured"], p["id"])
                     for p in ps)  # fmt: skip
    lo, hi = measured[0][0], measured[-1][0]
    powers = {2**k for k in range(hi.bit_length()) if lo < 2**k < hi}
    predicted = tuple((c, *_serve_figure(_serve(m, tmp, c), m["metric"]))
                      for c in sorted(powers | {c for c, _, _ in measured}))  # fmt: skip
    engine = _engine_title(m["engine"])
    title = (f"{ps[0]['model_or_shape']['model']} {m['recipe'] or 'bf16'} on "
             f"{m['hardware']} tp {m['tp']}, {engine}, {m['isl']}/{m['osl']}: "
             f"{'latency, s' if m['metric'] in TIMES else UNITS[m['metric']]}")  # fmt: skip
    sources = tuple(dict.fromkeys(p["source"] for p in ps))
    return Curve(title, UNITS[m["metric"]], sources, measured, predicted)


def curves(points: Iterable[dict]) -> list[Curve]:
    with tempfile.TemporaryDirectory() as d:
        return [curve(ps, Path(d)) for ps in series(points)]


CW, CH, CL, CR, CT, CB = 620, 340, 70, 170, 30, 46


def curve_svg(cv: Curve) -> str:
    """The published points (circles) against the estimate (solid) and the bound
    (dashed) across concurrency (log2 on x, linear from 0 on y)."""
    cs = [c for c, _, _ in cv.predicted]
    top = max(v for row in cv.predicted for v in row[1:]) * 1.08
    top = max(top, max(v for _, v, _ in cv.measured) * 1.08)
    pw, ph = CW - CL - CR, CH - CT - CB
    k0, k1 = log10(cs[0]), log10(cs[-1])

    def x(c: float) -> float:
        return CL + (log10(c) - k0) / (k1 - k0) * pw

    def y(v: float) -> float:
        return CT + ph - v / top * ph

    est, bnd, pts = PALETTE[0], PALETTE[2], PALETTE[1]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{CW}" height="{CH}" '
           f'viewBox="0 0 {CW} {CH}" role="img" aria-label="{xml(cv.title)}" '
           'font-family="Helvetica, Arial, sans-serif" font-size="11">',
           f'<text x="{CL}" y="18" fill="#1d2330">{xml(cv.title)}</text>',
           f'<rect x="{CL}" y="{CT}" width="{pw}" height="{ph}" fill="#fff" '
           'stroke="#d8dce4"/>']  # fmt: skip
    for c in cs:
        out.append(f'<line x1="{x(c):.1f}" y1="{CT + ph}" x2="{x(c):.1f}" y2="{CT + ph + 4}" '
                   f'stroke="#5b6475"/><text x="{x(c):.1f}" y="{CT + ph + 16}" '
                   f'text-anchor="middle" fill="#5b6475">{c}</text>')  # fmt: skip
    for v in _ticks(top):
        out.append(f'<line x1="{CL - 4}" y1="{y(v):.1f}" x2="{CL}" y2="{y(v):.1f}" '
                   f'stroke="#5b6475"/><text x="{CL - 6}" y="{y(v) + 4:.1f}" '
                   f'text-anchor="end" fill="#5b6475">{v:,.3g}</text>')  # fmt: skip
    out.append(f'<text x="{CL + pw / 2:.0f}" y="{CH - 10}" text-anchor="middle" '
               'fill="#1d2330">concurrency (requests in flight)</text>')  # fmt: skip
    for j, colour, dash in ((1, est, ""), (2, bnd, ' stroke-dasharray="5 4"')):
        line = " ".join(f"{x(row[0]):.1f},{y(row[j]):.1f}" for row in cv.predicted)
        out.append(f'<polyline points="{line}" fill="none" stroke="{colour}" '
                   f'stroke-width="2"{dash}/>')  # fmt: skip
    for c, v, pid in cv.measured:
        out.append(
            f'<circle cx="{x(c):.1f}" cy="{y(v):.1f}" r="4.5" fill="{pts}">'
            f"<title>{pid}: measured {xml(_fig(v, cv.unit))} at {c}</title></circle>"
        )
    for i, (label, colour) in enumerate((("measured (published)", pts),
                                         ("estimate", est), ("bound", bnd))):  # fmt: skip
        ly = CT + 14 + 18 * i
        out.append(f'<rect x="{CW - CR + 12}" y="{ly - 8}" width="12" height="8" '
                   f'fill="{colour}"/><text x="{CW - CR + 30}" y="{ly}" '
                   f'fill="#1d2330">{label}</text>')  # fmt: skip
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _ticks(top: float) -> list[float]:
    """0 and the multiples of a round step (1, 2 or 5 × 10ⁿ) up to `top`, four or so."""
    step = 10 ** math.floor(math.log10(top / 4))
    for m in (1, 2, 5, 10):
        if top / (m * step) <= 5:
            step *= m
            break
    return [i * step for i in range(int(round(top / step, 9)) + 1)]


def curve_section(cvs: list[Curve]) -> list[str]:
    """The page's curves: each chart, its points and sources (nothing without one)."""
    if not cvs:
        return []
    lines = ["## Curves against published ones", "",
             "Each published series (one configuration measured at several concurrencies) "
             "beside the estimate and the bound at each measured concurrency and every "
             "power of two between (`serve --concurrency`, as each point is scored).",
             ""]  # fmt: skip
    for cv in cvs:
        rows = [[c, _fig(e, cv.unit), _fig(b, cv.unit),
                 next((_fig(v, cv.unit) for cc, v, _ in cv.measured if cc == c), ""),
                 next((f"{e / v - 1:+.0%}" for cc, v, _ in cv.measured if cc == c), "")]
                for c, e, b in cv.predicted]  # fmt: skip
        lines += [f"### {md(cv.title)}", "", f"![{md(cv.title)}]({cv.name})", "",
                  _md(rows, ["concurrency", "estimate", "bound", "measured", "error"]), "",
                  "Sources: " + "; ".join(md(s) for s in cv.sources) + ".", ""]  # fmt: skip
    return lines


# --- the page ----------------------------------------------------------------------------


def _commit() -> str:
    """The commit the figures were computed at (with `+changes` for a dirty tree)."""
    try:
        rev = subprocess.run(["git", "rev-parse", "--short=10", "HEAD"], cwd=ROOT, text=True,
                             capture_output=True, check=True).stdout.strip()  # fmt: skip
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=ROOT, text=True, capture_output=True).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return rev + ("+changes" if dirty else "")


def _md(rows: list[list[object]], headers: list[str]) -> str:
    esc = [[md(v) for v in r] for r in rows]
    return tabulate(esc, headers=[md(h) for h in headers], tablefmt="github", disable_numparse=True)


def cluster_section(scored: list[Scored]) -> list[str]:
    lines = ["## Serving by cluster", "",
             "The out-of-sample serving points (one GPU and multi-GPU together) by the "
             "part's vendor, the model's family (MoE: fewer active parameters than total), "
             "the weights' precision and the engine the run used.", ""]  # fmt: skip
    for dim, rows in by_cluster(scored).items():
        lines += [_md(rows, [dim, *CLUSTER_HEADERS]), ""]
    return lines


def page(scored: list[Scored], skipped: list[Skipped], commit: str,
         cvs: list[Curve] | None = None) -> str:  # fmt: skip
    lines = [
        "# Accuracy",
        "",
        "The kernel-aware estimate (`--estimate kernels`) and the roofline (the bound) "
        "against every published measurement the `.model` language can express: kernels "
        "(GEMM, attention, bandwidth), single-GPU and multi-GPU serving, and training steps "
        "(the MFU as published). Error = predicted / measured − 1 on the figure as published "
        "(a time for kernels and latencies, tokens/s for throughputs, the MFU for "
        "training). The measurements, their sources and how each maps to a modelcost "
        "command: `benchmarks/data/measured-public.json` (kernel shapes: "
        "`tests/data/measured-kernels.json`).",
        "",
        f"Generated by `python benchmarks/accuracy.py --write` at commit `{commit}`; the "
        "estimate changes as the engine model grows, so re-run it to refresh this page.",
        "",
        "## The bound",
        "",
        bound_line(scored),
        "",
    ]
    past = beaten(scored)
    ins = [c for c in scored if c.in_sample]
    if past:
        lines += [_md([[c.id, c.group, c.hardware, c.what, _fig(c.measured, c.unit),
                        _fig(c.bound, c.unit), f"{c.beaten_by:.1%}"] for c in past],
                      ["id", "group", "part", "what", "measured", "bound", "past the bound by"]),
                  ""]  # fmt: skip
    lines += ["## Summary", "", _md(summary(scored), SUMMARY_HEADERS), "",
              "![predicted against measured, log-log](accuracy.svg)", "",
              *cluster_section(scored),
              *curve_section(cvs or []),
              f"## The {WORST} worst points (by the estimate's |error|)", "",
              _md(point_rows(worst(scored)), POINT_HEADERS), "",
              "## In-sample points (not counted above)", "",
              "Each of these measurements was taken into a figure of the model (its `built`"
              " in `tests/data/measured-kernels.json`), so the estimate gives it back by "
              "construction, up to the tile and wave quantization of its shape: a regression "
              "pin on that figure, not a validation of the estimate.", "",
              _md([[*r[:7], "; ".join(c.built)] for r, c in zip(point_rows(ins), ins,
                                                                  strict=True)],
                  [*POINT_HEADERS[:7], "built into"]), "",
              f"## Skipped ({len(skipped)} points: not expressible, or excluded, with why)", "",
              _md([[s.id, s.kind, s.hardware, s.why] for s in skipped],
                  ["id", "kind", "part", "why"]), "",
              "## Every point", "", _md(point_rows(scored), POINT_HEADERS), ""]  # fmt: skip
    return "\n".join(lines)


def _write(path: Path, text: str) -> None:
    """Whole or not at all: a temporary file beside the target, then a rename."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("-")]
    points = load(Path(args[0]) if args else DATA)
    scored, skipped = score(points)
    print(bound_line(scored))
    for c in beaten(scored):
        print(f"  point {c.id} ({c.hardware}, {c.what}): past its bound by {c.beaten_by:.1%}")
    print()
    print(tabulate(summary(scored), headers=SUMMARY_HEADERS, disable_numparse=True))
    for dim, rows in by_cluster(scored).items():
        print()
        print(tabulate(rows, headers=[f"serving by {dim}", *CLUSTER_HEADERS],
                       disable_numparse=True))  # fmt: skip
    print(f"\nworst {WORST} by the estimate's |error|:")
    print(tabulate(point_rows(worst(scored)), headers=POINT_HEADERS, disable_numparse=True))
    print(f"\nskipped: {len(skipped)} points (not expressible, or excluded; -v says why)")
    if "-v" in argv:
        print(tabulate(point_rows(scored), headers=POINT_HEADERS, disable_numparse=True))
        print(tabulate([[s.id, s.kind, s.hardware, s.why] for s in skipped],
                       headers=["id", "kind", "part", "why"]))  # fmt: skip
    if "--write" in argv:
        cvs = curves(points)
        svg, text = chart_svg(scored), page(scored, skipped, _commit(), cvs)
        _write(CHART, svg)
        _write(DOC, text)
        names = {cv.name for cv in cvs}
        for cv in cvs:
            _write(DOC.parent / cv.name, curve_svg(cv))
        for old in DOC.parent.glob("accuracy-curve-*.svg"):  # a series no longer published
            if old.name not in names:
                old.unlink()
        print(f"\nwrote {DOC.relative_to(ROOT)}, {CHART.relative_to(ROOT)} and {len(cvs)} curves")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
