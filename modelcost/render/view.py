"""The report view-model: one or more Reports (one per phase) → display-ready tables,
charts and text. Everything shown is computed here; templates only place it.

Units are in the column headers; large counts use SI prefixes (1 G = 1e9), memory held
binary ones (1 GiB = 2**30 B).
"""

from __future__ import annotations

from collections.abc import Callable

from modelcost.base.record import Record
from modelcost.base.version import __version__
from modelcost.ir.report import PER_TOKEN, OpEntry, Report, comm_label

from .bars import stacked_bar_svg
from .charts import Extent, Point, Roof, roofline_extent, roofline_svg
from .palette import kind_color, layer_color
from .table import Cell, Table, num
from .units import GIB, count, duration, fixed, held, pct, si


class Chart(Record, frozen=True):
    """One chart of a page: its file name beside a Markdown page (`prefill-roofline`
    + `.svg`), its title (the image's alt text) and its SVG."""

    slug: str
    title: str
    svg: str


class PhaseView(Record, frozen=True):
    phase: str
    heading: str
    kinds: Table
    layers: Table
    ops: Table
    kernels: Table
    charts: tuple[Chart, ...]  # the roofline, time by op kind, time by layer group


class ReportView(Record, frozen=True):
    title: str
    subtitle: str
    summary: Table
    per_token: Table
    phases: tuple[PhaseView, ...]
    notes: tuple[str, ...]
    footer: str
    memory_warning: str | None
    # (anchor, text, its subsections' (anchor, text)) of the page's sections: a section
    # and its subsections stay together in the contents' columns
    toc: tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...]

    @property
    def charts(self) -> tuple[Chart, ...]:
        return tuple(c for p in self.phases for c in p.charts)


SECTIONS = (  # each phase's sections: (anchor suffix, heading)
    ("roofline", "Roofline"),
    ("time", "Where the time goes"),
    ("kinds", "Time by op kind"),
    ("layers", "Layers"),
    ("ops", "Ops"),
    ("kernels", "Gluon kernels"),
)


def _backward_cells(o: OpEntry, training: bool) -> tuple[Cell, ...]:
    if not training:
        return ()
    if o.backward is None:
        return (Cell("—", -1.0), Cell("—", -1.0))
    b = o.backward
    return (num(si(b.flops), b.flops), num(fixed(b.time_s * 1e6), b.time_s))


def _why(o: OpEntry) -> str:
    """Why the op's estimate is what it is (the backward's after it, in training)."""
    why = o.estimate_reason or ""
    if o.backward is not None and o.backward.estimate_reason:
        why += f"; backward: {o.backward.estimate_reason}"
    return why


def _dtype(o: OpEntry) -> str:
    values = list(dict.fromkeys(o.dtypes.values()))
    return values[0] if len(values) == 1 else "/".join(values)


# ---------------------------------------------------------------- building


def _summary(reports: list[Report]) -> Table:
    r = reports[0]
    h, m = r.hardware, r.model
    rows = [
        ("model", f"{m.title} ({m.name})"),
        (
            "parameters",
            f"{count(m.params_total)} total ({m.params_total:,}), "
            f"{count(m.params_active)} active per token ({m.params_active:,})",
        ),
        ("hardware", f"{h.title} ({h.arch})"),
        (
            "peaks",
            f"{h.peak} compute, {h.bandwidth} bandwidth "
            f"({si(h.memory_bandwidth)}B/s); knee {h.knee:,.0f} FLOP/B at {h.knee_precision}",
        ),
        ("conventions", r.workload.conventions),
    ]
    for rep in reports:
        w, t = rep.workload, rep.totals
        shape = w.label
        fit = "fits" if t.memory.fits else "does NOT fit"
        devices = w.layout.devices
        spread = (
            f" on {devices} devices ({fixed(t.per_token.tokens_per_s_device, 1)} each), "
            f"{duration(t.comm_s)} in {comm_label(w.layout)} ({duration(t.comm_exposed_s)} exposed)"
            + (f", {duration(t.bubble_s)} pipeline bubble" if t.bubble_s else "")
            if devices > 1 or w.layout.offload
            else ""
        )
        rows.append(
            (
                w.phase,
                f"batch {w.batch}, {shape}: {duration(t.per_token.ms_per_step / 1e3)} per step, "
                f"{fixed(t.per_token.tokens_per_s, 1)} tokens/s{spread}, {t.bound}-bound; "
                f"memory{' per device' if devices > 1 else ''} "
                f"{held(t.memory.total)} of {held(t.memory.capacity)} "
                f"({rep.hardware.memory_basis}; {fit})",
            )
        )
    return Table(
        "summary", ("", "value"), tuple((Cell(k), Cell(v)) for k, v in rows), (False, False)
    )


def _opt(value: float | None, fmt) -> Cell:
    return Cell("—", -1.0) if value is None else num(fmt(value), value)


CellOf = Callable[[Report], Cell]  # one figure of a report, as its column's cell


def _step_cells() -> list[tuple[str, CellOf]]:
    """Tokens and time per step, per token, per second."""
    return [
        ("tokens per step", lambda r: num(f"{r.totals.per_token.tokens_per_step:,}",
                                          r.totals.per_token.tokens_per_step)),
        ("step time", lambda r: num(duration(r.totals.per_token.ms_per_step / 1e3),
                                    r.totals.per_token.ms_per_step)),
        (PER_TOKEN, lambda r: num(duration(r.totals.per_token.ms_per_token / 1e3),
                                  r.totals.per_token.ms_per_token)),
        ("tokens/s", lambda r: num(fixed(r.totals.per_token.tokens_per_s, 1),
                                   r.totals.per_token.tokens_per_s)),
    ]  # fmt: skip


def _layout_cells() -> list[tuple[str, CellOf]]:
    """What a layout of more than one device adds: its devices, collectives, bubble."""
    return [
        ("devices", lambda r: Cell(f"{r.workload.layout.devices}")),
        ("tokens/s per device", lambda r: num(fixed(r.totals.per_token.tokens_per_s_device, 1),
                                              r.totals.per_token.tokens_per_s_device)),
        ("collectives", lambda r: num(duration(r.totals.comm_s), r.totals.comm_s)),
        ("collectives exposed", lambda r: num(duration(r.totals.comm_exposed_s),
                                              r.totals.comm_exposed_s)),
        ("pipeline bubble", lambda r: num(duration(r.totals.bubble_s), r.totals.bubble_s)),
    ]  # fmt: skip


def _work_cells() -> list[tuple[str, CellOf]]:
    """The work: FLOPs, bytes, intensity, what bounds it, the MFU bound."""
    return [
        ("FLOPs", lambda r: num(si(r.totals.flops), r.totals.flops)),
        ("bytes", lambda r: num(si(r.totals.bytes), r.totals.bytes)),
        ("intensity (FLOP/B)", lambda r: num(fixed(r.totals.intensity, 1), r.totals.intensity)),
        ("bound", lambda r: Cell(f"{r.totals.bound} ({pct(r.totals.compute_share)} of time "
                                 "compute-bound)")),
        ("MFU bound", lambda r: num(pct(r.totals.mfu_bound), r.totals.mfu_bound)),
    ]  # fmt: skip


def _estimate_cells() -> list[tuple[str, CellOf]]:
    """The kernels' estimate beside the roofline."""
    return [
        ("estimate: step time", lambda r: _opt(r.totals.estimate_s, duration)),
        ("estimate: share of roofline", lambda r: _opt(r.totals.efficiency, pct)),
        ("estimate: MFU", lambda r: _opt(r.totals.mfu_estimate, pct)),
    ]


def _memory_cells() -> list[tuple[str, CellOf]]:
    """The memory a device holds, by part."""
    return [
        ("weights (GiB)", lambda r: num(fixed(r.totals.memory.weights / GIB),
                                        r.totals.memory.weights)),
        ("KV cache (GiB)", lambda r: num(fixed(r.totals.memory.kv_cache / GIB),
                                         r.totals.memory.kv_cache)),
        ("activations (GiB)", lambda r: num(fixed(r.totals.memory.activations / GIB),
                                            r.totals.memory.activations)),
        ("memory total (GiB)", lambda r: num(fixed(r.totals.memory.total / GIB),
                                             r.totals.memory.total)),
    ]  # fmt: skip


def _per_token(reports: list[Report]) -> Table:
    cells = _step_cells()
    if any(r.workload.layout.devices > 1 for r in reports):
        cells += _layout_cells()
    cells += _work_cells()
    if any(r.totals.estimate_s is not None for r in reports):
        cells += _estimate_cells()
    cells += _memory_cells()
    rows = tuple((Cell(label), *(cell(r) for r in reports)) for label, cell in cells)
    headers = ("", *(r.workload.phase for r in reports))
    return Table("per-token", headers, rows, (False, *(True for _ in reports)))


def _phase(r: Report, extent: Extent) -> PhaseView:
    phase = r.workload.phase
    w = r.workload
    heading = f"{phase.capitalize()}: batch {w.batch}, {w.label}"
    return PhaseView(phase, heading, _kinds_table(r), _layers_table(r), _ops_table(r),
                     _kernels_table(r), _phase_charts(r, extent))  # fmt: skip


def _kinds_table(r: Report) -> Table:
    """Time by op kind."""
    return Table(
        f"kinds-{r.workload.phase}",
        ("kind", "FLOPs", "bytes", "time (ms)", "share"),
        tuple(
            (
                Cell(k.kind),
                num(si(k.flops), k.flops),
                num(si(k.bytes), k.bytes),
                num(fixed(k.time_s * 1e3, 3), k.time_s),
                num(pct(k.share), k.share),
            )
            for k in r.kinds
        ),
        (False, True, True, True, True),
    )


def _layers_table(r: Report) -> Table:
    """Time by layer group."""
    return Table(
        f"layers-{r.workload.phase}",
        (
            "group",
            "block",
            "layers",
            "count",
            "FLOPs",
            "bytes",
            "AI (FLOP/B)",
            "time (ms)",
            "share",
        ),
        tuple(
            (
                Cell(g.group),
                Cell(g.block),
                Cell(g.layers),
                num(str(g.count), g.count),
                num(si(g.flops), g.flops),
                num(si(g.bytes), g.bytes),
                num(fixed(g.intensity, 1), g.intensity),
                num(fixed(g.time_s * 1e3, 3), g.time_s),
                num(pct(g.share), g.share),
            )
            for g in r.layers
        ),
        (False, False, False, True, True, True, True, True, True),
    )


def _op_row(o: OpEntry, estimated: bool, training: bool) -> tuple[Cell, ...]:
    """One op's row of the ops table."""
    k = o.kernel
    kernel = Cell("")
    if k is not None:
        kernel = Cell(k.id or "none", href=k.url, title=k.reason)
    return (
        Cell(o.name),
        Cell(o.kind),
        num(str(o.count), o.count),
        Cell(o.shape_label),
        Cell(_dtype(o)),
        num(si(o.flops), o.flops),
        num(si(o.bytes), o.bytes),
        num(fixed(o.intensity, 1), o.intensity),
        num(fixed(o.compute_s * 1e6), o.compute_s),
        num(fixed(o.memory_s * 1e6), o.memory_s),
        num(fixed(o.time_s * 1e6), o.time_s),
        Cell(o.bound),
        *(
            (
                Cell(
                    fixed((o.estimate_s or 0) * 1e6),
                    o.estimate_s or 0,
                    title=o.estimate_reason,
                ),
                num(pct(o.efficiency or 0), o.efficiency or 0),
            )
            if estimated
            else ()
        ),
        *_backward_cells(o, training),
        num(pct(o.share), o.share),
        kernel,
        *((Cell(_why(o)),) if estimated else ()),
    )


def _ops_table(r: Report) -> Table:
    """Every op: its figures, its estimate and backward where the report has them."""
    training = any(o.backward is not None for o in r.ops)
    estimated = r.totals.estimate_s is not None
    return Table(
        f"ops-{r.workload.phase}",
        (
            "op",
            "kind",
            "count",
            "shape",
            "dtype",
            "FLOPs",
            "bytes",
            "AI (FLOP/B)",
            "compute (µs)",
            "memory (µs)",
            "roofline (µs)",
            "bound",
            *(("estimate (µs)", "of roofline") if estimated else ()),
            *(("backward FLOPs", "backward (µs)") if training else ()),
            "share",
            "kernel",
            *(("why (estimate)",) if estimated else ()),
        ),
        tuple(_op_row(o, estimated, training) for o in r.ops),
        (False, False, True, False, False, True, True, True, True, True, True, False,
         *((True, True) if estimated else ()), *((True, True) if training else ()), True,
         False, *((False,) if estimated else ())),
    )  # fmt: skip


def _kernels_table(r: Report) -> Table:
    """The Gluon kernels that would serve the GEMMs."""
    kernel_rows = []
    for u in r.kernels:
        attained = [o for o in r.ops if o.name in u.ops]
        best = max((o.attained_flops for o in attained), default=0.0) / 1e12
        published = f"{u.tflops:,.0f} ({u.measured})" if u.tflops else "not published"
        kernel_rows.append(
            (
                Cell(u.title or "no Gluon kernel", href=u.url),
                Cell(published),
                num(fixed(best, 1), best),
                num(str(len(u.ops)), len(u.ops)),
                num(fixed(u.time_s * 1e3, 3), u.time_s),
                num(pct(u.share), u.share),
            )
        )
    return Table(
        f"kernels-{r.workload.phase}",
        (
            "kernel",
            "published TFLOPS (measured on)",
            "roofline TFLOPS (best op)",
            "GEMMs",
            "time (ms)",
            "share",
        ),
        tuple(kernel_rows),
        (False, False, True, True, True, True),
    )


def _phase_charts(r: Report, extent: Extent) -> tuple[Chart, ...]:
    """The roofline and the time by kind and by layer group."""
    phase = r.workload.phase
    chart = roofline_for(r, extent)
    kind_bar = stacked_bar_svg(
        [(k.kind, k.time_s, kind_color(k.kind)) for k in r.kinds], "time by op kind"
    )
    ranked = sorted(r.layers, key=lambda g: -g.time_s)
    shade = {g.group: layer_color(i) for i, g in enumerate(ranked)}
    layer_bar = stacked_bar_svg(
        [
            (
                f"{g.group} ({g.block}, ×{g.count})" if g.group != "model" else "model level",
                g.time_s,
                shade[g.group],
            )
            for g in r.layers
        ],
        "time by layer group",
    )
    return (
        Chart(f"{phase}-roofline", f"Roofline ({phase})", chart),
        Chart(f"{phase}-kinds", f"Time by op kind ({phase})", kind_bar),
        Chart(f"{phase}-layers", f"Time by layer group ({phase})", layer_bar),
    )


def _points(r: Report) -> list[Point]:
    return [
        Point(
            o.name,
            o.kind,
            o.intensity,
            o.attained_flops,
            o.share,
            f"{o.name} ({o.kind} ×{o.count}): {o.shape_label}; {si(o.flops)}FLOP, {si(o.bytes)}B, "
            f"AI {o.intensity:,.1f}; {o.time_s * 1e6:,.2f} µs {o.bound}-bound",
            ".".join(o.name.split(".")[-2:]),  # `attn.sdpa`, `mlp.down_proj`
        )
        for o in r.ops
    ]


def _roofs(r: Report) -> list[Roof]:
    roofs = sorted(
        {(o.unit, o.peak_precision, o.peak_flops) for o in r.ops if o.unit != "network"},
        key=lambda t: (-t[2], t[0], t[1]),
    )
    return [Roof(f"{u} {p}", f) for u, p, f in roofs]


def roofline_for(r: Report, extent: Extent | None = None) -> str:
    """A report's roofline chart (on the given axes)."""
    return roofline_svg(_points(r), _roofs(r), r.hardware.memory_bandwidth, extent)


def roofline_axes(reports: list[Report]) -> Extent:
    """One set of axes for every phase's roofline (and both sides of a diff)."""
    extents = [roofline_extent(_points(r), _roofs(r), r.hardware.memory_bandwidth)
               for r in reports]  # fmt: skip
    out = extents[0]
    for e in extents[1:]:
        out = out.union(e)
    return out


def build_view(reports: list[Report]) -> ReportView:
    """The view of one model on one target, for one or more phases."""
    r = reports[0]
    phases = " and ".join(x.workload.phase for x in reports)
    title = f"{r.model.title} on {r.hardware.title}"
    subtitle = (
        f"{phases}; {r.hardware.peak} peaks; {r.workload.conventions} conventions. "
        "FLOPs and bytes moved with SI prefixes (1 G = 1e9), memory held in GiB (2³⁰ B); "
        "times per op instance unless marked."
    )
    notes = tuple(dict.fromkeys(n for x in reports for n in x.notes))
    warning = next((x.totals.memory.warning for x in reports if x.totals.memory.warning), None)
    axes = roofline_axes(reports)
    return ReportView(
        title=title,
        subtitle=subtitle,
        summary=_summary(reports),
        per_token=_per_token(reports),
        phases=tuple(_phase(x, axes) for x in reports),
        notes=notes,
        footer=f"modelcost {__version__}",
        memory_warning=warning,
        toc=(
            ("summary", "Summary", ()),
            ("per-token", "Per token", ()),
            *(
                (
                    x.workload.phase,
                    x.workload.phase.capitalize(),
                    tuple((f"{x.workload.phase}-{a}", h) for a, h in SECTIONS),
                )
                for x in reports
            ),
            *((("notes", "Notes", ()),) if notes else ()),
        ),
    )
