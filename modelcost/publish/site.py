"""The docs site: a page per model × hardware (Markdown and HTML), requested diffs, and an
index comparing them all. Relative links only, so the folder drops into MkDocs, Sphinx
or any static host."""

from __future__ import annotations

from pathlib import Path

import modelcost.language.spec as ir
from modelcost.analyses.diff import diff
from modelcost.analyses.sweeps import check_calibration
from modelcost.base.errors import SpecError
from modelcost.base.record import Record, replace
from modelcost.estimate.costing import DEFAULT_COSTING, Costing
from modelcost.ir.graph import (
    DEFAULT_BATCH,
    DEFAULT_CONTEXT,
    DEFAULT_SEQ,
    ONE_DEVICE,
    Parallel,
    Phase,
    Workload,
)
from modelcost.ir.report import Report
from modelcost.lowering.validate import check_reads, for_phase, given_options, input_facts
from modelcost.render.bars import GridCell, grid_svg
from modelcost.render.env import render
from modelcost.render.formats import diff_markdown_files, markdown_files, render_diff, render_html
from modelcost.render.table import Cell, Table
from modelcost.render.units import count, duration, fixed
from modelcost.roofline.compile import compile_report
from modelcost.targets.hardware import Hardware


class SiteOptions(Record, frozen=True):
    """The workload of every page (prefill and decode side by side); defaults: options.py."""

    batch: int = DEFAULT_BATCH
    seq: int | None = None  # None: DEFAULT_SEQ
    context: int | None = None  # None: DEFAULT_CONTEXT
    parallel: Parallel = ONE_DEVICE
    # conventions, peaks, and the kernel-aware estimate (every page's ops carry it too)
    # with a calibration on top of its own target's pages
    costing: Costing = DEFAULT_COSTING


def _reports(spec: ir.Spec, hw: Hardware, o: SiteOptions) -> list[Report]:
    # a model with learned positions (GPT-2) runs at most that many: lowering caps the
    # default lengths (its page's notes say so), and the site caps one given for every
    # model; a vision model's length is its image's (its page says so too)
    patch, positions, decodes = input_facts(spec)  # the main stream's, as lowering reads them
    limit = positions.positions if positions is not None else None
    seq, context = o.seq, o.context
    if limit:
        seq = min(seq, limit) if seq else None
        context = min(context, limit) if context else None
    image = patch is not None
    out = []
    # an encoder has no decode; its page shows the forward pass only
    phases = (Phase.prefill, Phase.decode) if decodes else (Phase.prefill,)
    asked = Workload(phases[0], o.batch, None if image else seq, context, parallel=o.parallel)
    check_reads(phases, given_options(asked), o.parallel.weight_copies)
    for phase in phases:
        w = for_phase(replace(asked, phase=phase))  # what this phase reads of them
        out.append(compile_report(spec, hw, w, how=o.costing.on(hw.name)))
    return out


class SitePage(Record, frozen=True):
    """One model on one target: its page name, its reports and its files (the Markdown
    page and its charts, the HTML page), by path relative to the site."""

    name: str
    spec: str
    hardware: Hardware
    reports: tuple[Report, ...]
    files: tuple[tuple[str, str], ...]


FORMATS = ("md", "html")


def site_page(
    name: str, spec: ir.Spec, hw: Hardware, options: SiteOptions, formats=FORMATS
) -> SitePage:
    """Compile and render one model × target page."""
    return render_page(name, hw, _reports(spec, hw, options), formats)


def render_page(
    name: str, hw: Hardware, reports: list[Report] | tuple[Report, ...], formats=FORMATS
) -> SitePage:
    """One model × target page from its reports (compiled now, or read back)."""
    page = f"{name}-{hw.name}"
    files: dict[str, str] = {}
    if "md" in formats:
        files |= markdown_files(list(reports), f"{page}.md")
    if "html" in formats:
        files[f"{page}.html"] = render_html(list(reports))
    return SitePage(name=page, spec=name, hardware=hw, reports=tuple(reports),
                    files=tuple(sorted(files.items())))  # fmt: skip


def build_site(
    specs: list[tuple[str, ir.Spec]],
    targets: list[Hardware],
    diffs: list[tuple[str, str]],
    options: SiteOptions | None = None,
    formats: tuple[str, ...] = FORMATS,
) -> dict[str, str]:
    """Every file of the site by relative path. `specs` pairs a page name with a spec."""
    options = options or SiteOptions()
    _check_names(specs, targets)
    check_calibration(options.costing.calibration, targets)
    pages = [site_page(name, spec, hw, options, formats) for name, spec in specs for hw in targets]
    return assemble(pages, [n for n, _ in specs], targets, diffs, options, formats)


def assemble(
    pages: list[SitePage],
    names: list[str],
    targets: list[Hardware],
    diffs: list[tuple[str, str]],
    options: SiteOptions,
    formats: tuple[str, ...] = FORMATS,
) -> dict[str, str]:
    """The site from its pages: theirs, the diffs' and the index's files."""
    files: dict[str, str] = {}
    for p in pages:
        files.update(p.files)
    computed = {(p.spec, p.hardware.name): list(p.reports) for p in pages}
    diff_rows = []
    for a, b in diffs:
        for side in (a, b):
            if side not in names:
                raise SpecError(
                    f"--diff names `{side}`, which is not among the specs",
                    filename="modelcost",
                    hint=f"specs: {', '.join(names)}",
                )
        for hw in targets:
            ra, rb = computed[(a, hw.name)], computed[(b, hw.name)]
            n = min(len(ra), len(rb))
            d = diff(ra[:n], rb[:n])
            page = f"diff-{a}-vs-{b}-{hw.name}"
            if "md" in formats:
                files |= diff_markdown_files(d, f"{page}.md", "files", (ra[:n], rb[:n]))
            if "html" in formats:
                files[f"{page}.html"] = render_diff(d, "html", sides=(ra[:n], rb[:n]))
            diff_rows.append((a, b, hw, page, d))
    all_pages = [p.name for p in pages] + [p for _, _, _, p, _ in diff_rows]
    clash = next((p for p in all_pages if all_pages.count(p) > 1 or p == "index"), None)
    if clash is not None:
        raise SpecError(
            f"two pages of the site would both be `{clash}`",
            filename="modelcost",
            hint="give the spec files distinct names (pages are named spec-hardware)",
        )
    grid = _grid(pages, names, targets)
    if "md" in formats:
        files["index-charts/grid.svg"] = grid + "\n"
    for ext in formats:
        files[f"index.{ext}"] = render(
            f"site_index.{ext}.j2",
            index=_index(pages, ext),
            diffs=_diff_index(diff_rows, ext),
            workload=workload_statement(options),
            grid=grid,
        )
    return files


def workload_statement(o: SiteOptions) -> str:
    """What every page of the site ran, in words (the index states it)."""
    seq, context = o.seq or DEFAULT_SEQ, o.context or DEFAULT_CONTEXT
    layout, how = o.parallel.label or "one device", o.costing
    return (
        f"batch {o.batch}; prefill of {seq} tokens and decode at context {context} (or a "
        f"model's own length: its learned positions or its image); {layout}; "
        f"{how.conventions.value} conventions, {how.peak} peaks, {how.bandwidth} bandwidth"
        + ("; the kernel-aware estimate beside the roofline" if how.estimated else "")
        + (f", calibrated on {how.calibration.hardware}" if how.calibration is not None else "")
    )


def _grid(pages: list[SitePage], names: list[str], targets: list[Hardware]) -> str:
    """The model × hardware grid of the index."""
    titles: dict[str, str] = {}
    cells = {}
    for p in pages:
        by_phase = {r.workload.phase: r for r in p.reports}
        pre, dec = by_phase.get("prefill"), by_phase.get("decode")
        titles[p.spec] = p.reports[0].model.title
        i, j = names.index(p.spec), [h.name for h in targets].index(p.hardware.name)
        cells[(i, j)] = GridCell(
            prefill_s=pre.totals.per_token.ms_per_token / 1e3 if pre else 0.0,
            decode_s=dec.totals.per_token.ms_per_token / 1e3 if dec else None,
            decode_tps=dec.totals.per_token.tokens_per_s if dec else None,
            fits=all(r.totals.memory.fits for r in p.reports),
        )
    return grid_svg([titles.get(n, n) for n in names], [h.title for h in targets], cells,
                    "per token and tokens/s, by model and target")  # fmt: skip


def _check_names(specs: list[tuple[str, ir.Spec]], targets: list[Hardware]) -> None:
    """Each spec and each target once: two specs of one name would share their pages."""
    for what, names in (
        ("spec", [n for n, _ in specs]),
        ("hardware target", [h.name for h in targets]),
    ):
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup is not None:
            raise SpecError(
                f"two {what}s are both named `{dup}`",
                filename="modelcost",
                hint="pages are named after spec file stems: rename one of the files"
                if what == "spec"
                else "name each target once in --hw",
            )


def _index(pages: list[SitePage], ext: str) -> Table:
    out = []
    for sp in pages:
        hw, reports, page = sp.hardware, sp.reports, sp.name
        by_phase = {r.workload.phase: r for r in reports}
        p, d = by_phase.get("prefill"), by_phase.get("decode")
        m = reports[0].model
        fits = all(r.totals.memory.fits for r in reports)
        out.append((
            Cell(m.title, href=f"{page}.{ext}"), Cell(hw.title),
            Cell(count(m.params_total), m.params_total),
            Cell(count(m.params_active), m.params_active),
            Cell(duration(p.totals.per_token.ms_per_token / 1e3), p.totals.per_token.ms_per_token)
            if p else Cell("—", -1),
            Cell(duration(d.totals.per_token.ms_per_token / 1e3), d.totals.per_token.ms_per_token)
            if d else Cell("—", -1),
            Cell(fixed(d.totals.per_token.tokens_per_s, 1), d.totals.per_token.tokens_per_s)
            if d else Cell("—", -1),
            Cell("yes" if fits else "no"),
        ))  # fmt: skip
    return Table(
        "index",
        ("model", "hardware", "params", "active", "prefill per token", "decode per token",
         "decode tokens/s", "fits in HBM"),
        tuple(out),
        (False, False, True, True, True, True, True, False),
    )  # fmt: skip


def _diff_index(rows, ext: str) -> Table:
    out = []
    for a, b, hw, page, d in rows:
        change = d.phases[0].time_change
        out.append((Cell(f"{a} vs {b}", href=f"{page}.{ext}"), Cell(hw.title),
                    Cell(f"{change * 100:+.1f}%", change)))  # fmt: skip
    return Table("diffs", ("diff", "hardware", "prefill time change"), tuple(out),
                 (False, False, True))  # fmt: skip


SITE_MARK = "<!-- written by modelcost site -->\n"  # the last line of every file it writes


def marked(text: str) -> str:
    """A page as the site writes it: with the mark that lets the next run replace it."""
    return text + "\n" + SITE_MARK


def foreign_files(files: dict[str, str], out: Path) -> list[str]:
    """The files of `files` that exist in `out` but that `modelcost site` did not write
    (an index a user wrote must not be overwritten without --force)."""
    foreign = []
    for rel in sorted([*files, MANIFEST]):
        path = out / rel
        if not path.exists() and not path.is_symlink():
            continue
        if not _ours(path):  # a FIFO, a device, a directory, a user's page: never ours
            foreign.append(rel)
    return foreign


# the list of what the last run wrote, in the folder, so the next removes what it no
# longer writes (a page of a model dropped from the command): nothing else is removed
MANIFEST = ".modelcost-site"


def _ours(path: Path) -> bool:
    """Whether `path` is a regular file ending with the site's mark."""
    if path.is_symlink() or not path.is_file():
        return False
    try:
        with open(path, "rb") as f:
            f.seek(max(0, path.stat().st_size - len(SITE_MARK)))
            return f.read().decode("utf-8", errors="replace") == SITE_MARK
    except OSError:
        return False


def _written_before(out: Path) -> list[str]:
    """What the manifest says the last run wrote: relative paths inside `out` only."""
    manifest = out / MANIFEST
    if manifest.is_symlink() or not manifest.is_file():
        return []
    try:
        lines = manifest.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    return [rel for rel in lines if rel and not rel.startswith(("#", "<!--"))
            and not Path(rel).is_absolute() and ".." not in Path(rel).parts]  # fmt: skip


def write_site(files: dict[str, str], out: Path, write) -> list[str]:
    """Write every file (each atomically) once all were rendered, then remove what the
    last run wrote and this one does not (its pages still marked as the site's, and the
    folders that leaves empty); return what was removed."""
    out.mkdir(parents=True, exist_ok=True)
    before = _written_before(out)
    for rel, text in sorted(files.items()):
        (out / rel).parent.mkdir(parents=True, exist_ok=True)  # a page's charts folder
        write(out / rel, marked(text))
    removed = []
    for rel in sorted(set(before) - set(files)):
        path = out / rel
        if _ours(path):
            path.unlink()
            removed.append(rel)
            folder = path.parent
            while folder != out and folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
                folder = folder.parent
    listing = "# written by modelcost site: the next run removes what it no longer writes\n"
    write(out / MANIFEST, marked(listing + "".join(f"{rel}\n" for rel in sorted(files))))
    return removed
