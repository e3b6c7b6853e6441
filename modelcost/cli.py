"""The command line: `modelcost check | fmt | params | compile | diff | site | hw | schema`.

Exit codes: 0 ok, 1 a requested check failed (e.g. `fmt --check`), 2 bad input or usage.
Bad input is reported as `path:line:col: error: message` with the source line, a caret
and a hint, never as a traceback.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from .errors import SpecError
from .executors import EXECUTORS
from .files import (
    ClosedStdout,
    StdoutClosedError,
    check_output,
    read_text,
    write_stdout,
    write_text,
)
from .options import (
    ENGINE,
    ESTIMATE,
    LAYOUT,
    MOE,
    ROOFLINE,
    SITE_LAYOUT,
    WORKLOAD,
    add_options,
    concurrencies,
    counts,
    length_ratio,
    positive,
    rate,
    requests,
    seconds,
    seed,
)
from .render import DIFF_FORMATS, FORMATS, SWEEP_FORMATS
from .render.chart_modes import CHART_MODES
from .render.escape import clean, terminal
from .render.units import count, fixed
from .settings import (
    DEFAULT_OBJECTIVE,
    DEFAULT_PROMPTS,
    DEFAULT_REQUESTS,
    DEFAULT_SERVE_ESTIMATE,
    GIB,
    MAX_CURVE_POINTS,
    MAX_EVENTS,
    MAX_MIX_CLASSES,
    MAX_POINTS,
    MAX_REQUESTS,
    MAX_STEPS,
    MAX_STREAMED,
    OBJECTIVES,
    RATES,
    SHARES,
    TRAIN_MICRO_BATCHES,
    TRAIN_TOP,
    estimate_mode,
)
from .version import __version__

EXIT_OK, EXIT_CHECK_FAILED, EXIT_BAD_INPUT = 0, 1, 2

if TYPE_CHECKING:
    from .graph import Parallel
    from .render.chart_modes import ChartMode


def _report(err: SpecError) -> None:
    print(err.render(), file=sys.stderr)


def cmd_check(args: argparse.Namespace) -> int:
    from .params import count_params
    from .resolve import load_spec, load_specs

    status = EXIT_OK
    for path in args.specs:
        if path.endswith(".hw"):
            status = max(status, _check_hardware(path))
            continue
        try:
            specs = [load_spec(path, args.model)] if args.model else load_specs(path)
        except SpecError as err:
            _report(err)
            status = EXIT_BAD_INPUT
            continue
        for spec in specs:
            total = count_params(spec).total
            print(f"ok  {clean(path)}  {spec.name}  {count(total)} parameters")
    return status


def _check_hardware(path: str) -> int:
    from .hardware import load_hardware

    try:
        hw = load_hardware(path)
    except SpecError as err:
        _report(err)
        return EXIT_BAD_INPUT
    print(f"ok  {clean(path)}  {hw.name}  {clean(hw.title)} ({clean(hw.arch)})")
    return EXIT_OK


def cmd_fmt(args: argparse.Namespace) -> int:
    from .fmt import format_source

    status = EXIT_OK
    for path in args.specs:
        try:
            text = read_text(path)
            formatted = format_source(text, path)
        except SpecError as err:
            _report(err)
            status = EXIT_BAD_INPUT
            continue
        if args.check:
            if formatted != text:
                print(f"would reformat {path}", file=sys.stderr)
                status = max(status, EXIT_CHECK_FAILED)
        elif args.write:
            if formatted != text:
                try:
                    write_text(path, formatted)
                except OSError as exc:
                    print(f"{path}: error: cannot write: {exc.strerror or exc}", file=sys.stderr)
                    status = EXIT_BAD_INPUT
                    continue
                print(f"reformatted {path}", file=sys.stderr)
        else:
            write_stdout(formatted)
    return status


def cmd_params(args: argparse.Namespace) -> int:
    from .params import count_params
    from .resolve import load_spec

    try:
        spec = load_spec(args.spec, args.model)
    except SpecError as err:
        _report(err)
        return EXIT_BAD_INPUT
    counts = count_params(spec)
    if args.format == "json":
        print(json.dumps(counts.model_dump(mode="json"), indent=2))
        return EXIT_OK
    from tabulate import tabulate

    rows = [
        [c.value, f"{n:,}", f"{counts.active_components[c]:,}"]
        for c, n in counts.components.items()
    ]
    rows.append(["total", f"{counts.total:,}", f"{counts.active:,}"])
    rows += [[f"  of which stream `{name}`", f"{n:,}", ""] for name, n in counts.streams.items()]
    rows += [[f"apart: `{name}` (auxiliary)", f"{n:,}", ""] for name, n in counts.apart.items()]
    print(f"{clean(spec.title)} ({spec.name}): {count(counts.total)} total, "
          f"{count(counts.active)} active per token")  # fmt: skip
    print(
        tabulate(
            rows, headers=["component", "total", "active"], colalign=("left", "right", "right")
        )
    )
    return EXIT_OK


def cmd_schema(args: argparse.Namespace) -> int:
    from .report import ReportSet
    from .spec import Spec

    model = ReportSet if args.report else Spec
    print(json.dumps(model.model_json_schema(), indent=2, sort_keys=True))
    return EXIT_OK


def _percent(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a percentage, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected a finite percentage ≥ 0, got {text!r}")
    return value


def _share(text: str) -> float:
    value = _percent(text.removesuffix("%"))
    if value >= 100:
        raise argparse.ArgumentTypeError(f"expected a percentage below 100, got {text!r}")
    return value


def _fraction(text: str) -> float:
    """A share of memory: above 0, at most 1 (`0.85`)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value <= 1:  # NaN too
        raise argparse.ArgumentTypeError(f"expected a fraction above 0 and at most 1, got {text!r}")
    return value


def _kinds(text: str) -> frozenset[str]:
    return frozenset(k.strip() for k in text.split(",") if k.strip())


def cmd_compile(args: argparse.Namespace) -> int:
    from .hardware import load_hardware
    from .resolve import load_spec

    try:
        spec = load_spec(args.spec, args.model)
        reports = _compile_all(spec, load_hardware(args.hw), args, phases=_phases(spec, args))
    except SpecError as err:
        _report(err)
        return EXIT_BAD_INPUT
    if args.format != "text" or args.output:  # the text summary already says it
        for r in reports:
            if r.totals.memory.warning:
                print(f"modelcost: warning: {clean(r.totals.memory.warning)}", file=sys.stderr)
    if args.format == "md":
        from .render.formats import markdown_files, render_markdown

        mode = _chart_mode(args)
        if mode == "files":
            return _emit_files(markdown_files(reports, args.output), args.output)
        return _emit(render_markdown(reports, mode), args.output)
    if args.charts:
        return _usage("--charts applies to --format md")
    return _emit(_render_reports(reports, args.format), args.output)


def _phases(spec, args: argparse.Namespace) -> list:
    """The phases to compile: of several, decode is skipped (with a note) for a model
    that has none (an encoder); asked alone, lowering refuses it."""
    from .graph import Phase
    from .validate import decodes

    phases = list(args.phase)
    if len(phases) > 1 and Phase.decode in phases and not decodes(spec):
        print(terminal(f"modelcost: note: `{spec.name}` has no causal attention or SSM, so no "
                       "decode step: decode skipped"), file=sys.stderr)  # fmt: skip
        phases.remove(Phase.decode)
    return phases


def _chart_mode(args: argparse.Namespace) -> ChartMode:
    """Markdown's charts: SVG files beside a page written with -o, else a note."""
    to_file = args.output not in (None, "-")
    if args.charts == "files" and not to_file:
        raise SystemExit(_usage("--charts files needs -o PAGE.md (the charts go beside it)"))
    mode: ChartMode = args.charts or ("files" if to_file else "note")
    return mode


def _usage(message: str) -> int:
    print(f"modelcost: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def _emit_files(files: dict[str, str], output: str) -> int:
    """A page and its charts: the charts first, the page last, each never half-written."""
    base = Path(output).parent
    page = Path(output).name
    try:
        check_output(output)  # Path() would drop a trailing slash
        for rel, text in sorted(files.items(), key=lambda kv: kv[0] == page):
            target = Path(output) if rel == page else base / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            write_text(target, text)
    except OSError as exc:
        print(f"{output}: error: cannot write: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return EXIT_OK


def _render_reports(reports: list, fmt: str) -> str:
    from .render import render

    return render(reports, fmt)


def _compile_all(
    spec, hw, args: argparse.Namespace, suffix: str = "", phases: list | None = None
) -> list:
    """One report per requested phase (or `phases`); `suffix` picks the `--X-b`
    overrides of a diff."""
    from .compile import compile_report
    from .costing import costing
    from .graph import Workload
    from .record import replace
    from .validate import check_reads, for_phase, given_options

    def pick(name: str):
        value = getattr(args, f"{name}{suffix}", None) if suffix else None
        return getattr(args, name) if value is None else value

    phases = phases if phases is not None else pick("phase")
    layout = _micro_batched(args, _layout(args, LAYOUT, pick), pick("batch"), phases)
    estimate, calibration = _estimation(args, hw)
    how = costing(args.conventions, args.peak, args.bandwidth, estimate, calibration, args.engine,
                  args.moe_imbalance)  # fmt: skip
    asked = Workload(phases[0], pick("batch"), pick("seq"), pick("context"), args.logits, layout,
                     **{name: getattr(args, name, 0) for name in ENGINE},
                     streams=pick("stream"))  # fmt: skip
    # an option no phase asked for reads is refused; each phase takes what it reads
    check_reads(phases, given_options(asked), layout.weight_copies)
    return [
        compile_report(
            spec,
            hw,
            for_phase(replace(asked, phase=phase)),
            only=getattr(args, "only", None),
            how=how,
        )
        for phase in phases
    ]


def _micro_batched(args: argparse.Namespace, layout: Parallel, batch: int, phases) -> Parallel:
    """The layout with `--micro-batch M` (Megatron's --micro-batch-size) said as its
    microbatches: batch = M × dp × microbatches, as Megatron-LM derives its gradient
    accumulation; refused outside training, beside --microbatches, or where the batch
    does not split."""
    from .graph import ONE_DEVICE, Phase
    from .record import replace

    m = getattr(args, "micro_batch", None)
    if m is None:
        return layout
    if list(phases) != [Phase.train]:
        raise SpecError("--micro-batch is a training option (Megatron's --micro-batch-size)",
                        filename="modelcost", hint="use --phase train, or leave out "
                        "--micro-batch")  # fmt: skip
    if layout.microbatches != ONE_DEVICE.microbatches:
        raise SpecError("--micro-batch sets the microbatches (--batch / (dp × M)): give one "
                        "of --micro-batch and --microbatches", filename="modelcost")  # fmt: skip
    if batch % (layout.dp * m):
        raise SpecError(
            f"--batch {batch:,} does not split into micro-batches of {m:,} over "
            f"{layout.dp:,} replica{'s' if layout.dp != 1 else ''} (Megatron's global batch "
            "is micro-batch × dp × microbatches)",
            filename="modelcost",
            hint=f"a --batch that is a multiple of {layout.dp * m:,}",
        )
    return replace(layout, microbatches=batch // (layout.dp * m))


def _estimation(args: argparse.Namespace, hw=None):
    """(--estimate, the --calibrate file read for `hw` or for its own target): the one
    reading of the estimate options every command shares; a calibration implies the
    kernels' estimate."""
    if not getattr(args, "calibrate", None):
        return args.estimate, None
    from .calibration import load_calibration

    calibration = load_calibration(args.calibrate, hw)
    return estimate_mode(args.estimate, calibration), calibration


def _layout(args: argparse.Namespace, names: Sequence[str], pick: Callable | None = None):
    """The device layout the flags `names` give (`pick` chooses a diff side's)."""
    from .graph import Parallel

    get = pick or (lambda name: getattr(args, name))
    try:
        return Parallel(**{n: get(n) for n in names if n != "sp"}, sp=args.sp)
    except ValueError as err:  # a layout that cannot be: say why, as any bad input
        raise SpecError(f"{err}", filename="modelcost") from None


def cmd_sweep(args: argparse.Namespace) -> int:
    from .hardware import load_hardware
    from .perfmodel import Conventions
    from .render import STREAMED_FORMATS
    from .resolve import load_specs
    from .sweeps import ENGINE_AXES, LAYOUT_AXES, plan

    streamed = args.format in STREAMED_FORMATS
    try:
        _check_executor(args, "sweep")
        specs = [spec for path in args.specs for spec in load_specs(path)]
        targets = [load_hardware(h.strip()) for h in args.hw.split(",") if h.strip()]
        if not targets:
            raise SpecError(f"--hw names no target: {args.hw!r}", filename="modelcost",
                            hint="e.g. --hw mi300x,h200")  # fmt: skip
        estimate, calibration = _estimation(args)
        found = plan(
            specs, targets, args.phase, args.batch, args.seq, args.context,
            {name: getattr(args, name) for name in LAYOUT_AXES}, args.sp,
            {name: getattr(args, name) for name in ENGINE_AXES},
            Conventions(args.conventions), args.peak, args.bandwidth,
            estimate, calibration, args.engine,
            limit=MAX_STREAMED if streamed else MAX_POINTS,
        )  # fmt: skip
        if streamed:
            return _stream_sweep(found, args)
        return _held_sweep(found, args)
    except SpecError as err:
        _report(err)
        return EXIT_BAD_INPUT


def _check_executor(args: argparse.Namespace, where: str | None) -> None:
    """--jobs, --executor and --address go with the work that shares them (`where`:
    None when the command runs none), and --address with Ray alone."""
    given = [flag for flag, on in (("--jobs", args.jobs > 1),
                                   ("--executor", args.executor != "local"),
                                   ("--address", args.address is not None)) if on]  # fmt: skip
    if where is None and given:
        one = len(given) == 1
        raise SpecError(f"{', '.join(given)} {'shares' if one else 'share'} out the layouts "
                        f"of `serve --search` (aggregated): {'it goes' if one else 'they go'} "
                        "with --search, without --disagg or --devices", filename="modelcost",
                        hint=f"add --search, or leave out {', '.join(given)}")  # fmt: skip
    if args.address is not None and args.executor != "ray":
        raise SpecError("--address is a Ray cluster's: it goes with --executor ray",
                        filename="modelcost", hint="add --executor ray")  # fmt: skip
    if args.executor == "ray" and args.jobs > 1:
        raise SpecError("--jobs is this machine's worker processes; with --executor ray "
                        "the cluster's CPUs share the work", filename="modelcost",
                        hint="leave out --jobs")  # fmt: skip


def _executor_options(p: argparse.ArgumentParser, what: str) -> None:
    """--executor and --address, declared once for sweep and serve --search."""
    p.add_argument("--executor", choices=EXECUTORS, default="local",
                   help=f"where the {what} are computed: this machine (with --jobs), or Ray "
                   "tasks on a Ray cluster (pip install 'modelcost[ray]'); the answers come "
                   "back in order either way (default local)")  # fmt: skip
    p.add_argument("--address", metavar="ADDR",
                   help="with --executor ray: the cluster to join (`auto`, or "
                   "ray://HEAD:10001); default: start a local one")  # fmt: skip


def _swept(found, args: argparse.Namespace):
    """The plan's rows and skips as they are computed, with the progress line."""
    from .progress import Progress
    from .sweeps import run

    progress = Progress(found.size, enabled=False if args.quiet else None)
    try:
        for done, result in enumerate(run(found, args.jobs, executor=args.executor,
                                          address=args.address), 1):  # fmt: skip
            yield result
            progress.update(done)
    finally:
        progress.close()


def _said_skips(summary, total: int) -> None:
    """Skipped points summed up on stderr: one line per reason, its count, an example."""
    if not summary.total:
        return
    print(f"modelcost: skipped {summary.total:,} of {total:,} points:", file=sys.stderr)
    for line in summary.lines():
        print(f"  {clean(line)}", file=sys.stderr)


def _held_sweep(found, args: argparse.Namespace) -> int:
    """A sweep written once whole (md, json, html): its rows held in memory."""
    from .render.sweep_format import render_sweep
    from .sweeps import Skip, SkipSummary, Sweep, SweepRow

    rows, skips, summary = [], [], SkipSummary()
    for result in _swept(found, args):
        if isinstance(result, SweepRow):
            rows.append(result)
        elif isinstance(result, Skip):
            skips.append(result.said)
            summary.add(result)
    _said_skips(summary, found.size)
    if not rows:
        print("modelcost: error: no point of the sweep can run", file=sys.stderr)
        return EXIT_BAD_INPUT
    result = Sweep.trusted(rows=tuple(rows), skipped=tuple(skips))
    return _emit(render_sweep(result, args.format), args.output)


class _NoRows(Exception):
    """No point of a streamed sweep ran: its file is not written."""


def _stream_sweep(found, args: argparse.Namespace) -> int:
    """A sweep written row by row (csv, jsonl, parquet) as the points are computed:
    none held, a file renamed into place when the sweep ends (files.streamed)."""
    from .files import streamed
    from .render.sweep_stream import writer
    from .sweeps import Skip, SkipSummary

    summary, rows = SkipSummary(), 0
    try:
        with streamed(args.output) as out:
            w = None
            for result in _swept(found, args):
                if isinstance(result, Skip):
                    summary.add(result)
                    continue
                if w is None:  # the header (a Parquet file's schema) with the first row
                    w = writer(args.format, out)
                w.write(result)
                rows += 1
            if w is None:
                raise _NoRows
            w.close()
    except _NoRows:
        _said_skips(summary, found.size)
        print("modelcost: error: no point of the sweep can run", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as exc:
        if args.output in (None, "-"):
            raise  # standard output closed or a broken pipe: main says so
        print(f"{args.output}: error: cannot write: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    _said_skips(summary, found.size)
    return EXIT_OK


def cmd_serve(args: argparse.Namespace) -> int:
    from .hardware import load_hardware
    from .render.serving_format import render_mix, render_search, render_serving
    from .resolve import load_spec
    from .serving import Engine, load_mix, search, serve, serve_mix

    try:
        spec, hw = load_spec(args.spec, args.model), load_hardware(args.hw)
        engine = Engine(args.budget or 0, args.prefix_hit / 100, args.engine,
                        args.memory_fraction)  # fmt: skip
        layout = _layout(args, SITE_LAYOUT)
        estimate, calibration = _estimation(args, hw)
        speculation = _speculation(args)
        if args.objective is not None and not args.search:
            raise SpecError("--objective goes with --search", filename="modelcost",
                            hint="add --search, or leave out --objective")  # fmt: skip
        if _curve_asked(args):
            return _serve_curve(args, spec, hw, engine, layout, estimate, calibration)
        if args.concurrency is not None:  # one concurrency: the point's
            args.concurrency = args.concurrency[0]
        shared = args.search and args.disagg is None and args.devices is None
        _check_executor(args, "serve --search" if shared else None)
        if args.disagg is not None or args.devices is not None:
            met, why, text = _serve_disagg(args, spec, hw, engine, layout, estimate, calibration)
            return _serve_out(text, args.output, met, why, args)
        if args.rate is not None or args.requests is not None or args.seed is not None:
            return _serve_arrivals(args, spec, hw, engine, layout, estimate, calibration)
        if args.mix is not None:
            if args.isl or args.osl or args.search or args.concurrency:
                raise SpecError("--mix gives the requests: leave out --isl, --osl, "
                                "--concurrency and --search", filename="modelcost")  # fmt: skip
            mix = serve_mix(spec, hw, load_mix(args.mix), layout, args.tpot, args.ttft, engine,
                            estimate, calibration, speculation, args.moe_imbalance)  # fmt: skip
            met, why = mix.meets_targets, "a request class misses them"
            text = render_mix(mix, args.format)
        else:
            if not (args.isl and args.osl):
                raise SpecError("give --isl and --osl (or a --mix file)", filename="modelcost")
            if args.search:
                if args.concurrency:
                    raise SpecError("--search chooses the concurrency too: leave out "
                                    "--concurrency", filename="modelcost")  # fmt: skip
                found = search(spec, hw, args.isl, args.osl, args.tpot, args.ttft, engine, layout,
                               estimate, calibration, speculation,
                               args.objective or DEFAULT_OBJECTIVE, args.moe_imbalance,
                               jobs=args.jobs, executor=args.executor,
                               address=args.address)  # fmt: skip
                met, why = found.chosen is not None, found.why
                text = render_search(found, args.format)
            else:
                one = serve(spec, hw, args.isl, args.osl, layout, args.concurrency, args.tpot,
                            args.ttft, engine, estimate, calibration, speculation,
                            args.moe_imbalance)  # fmt: skip
                met, why, text = one.meets_targets, one.why, render_serving(one, args.format)
    except SpecError as err:
        _report(err)
        return EXIT_BAD_INPUT
    return _serve_out(text, args.output, met, why, args)


def cmd_train(args: argparse.Namespace) -> int:
    from .graph import DEFAULT_SEQ
    from .hardware import load_hardware
    from .render.training_format import render_training
    from .resolve import load_spec
    from .training import search_training

    try:
        spec, hw = load_spec(args.spec, args.model), load_hardware(args.hw)
        _check_executor(args, "train")
        found = search_training(spec, hw, args.devices, args.global_batch,
                                args.seq or DEFAULT_SEQ, tuple(args.micro_batch), args.estimate,
                                args.overlap, args.jobs, args.executor, args.address,
                                args.grads)  # fmt: skip
        text = render_training(found, args.format, args.top)
    except SpecError as err:
        _report(err)
        return EXIT_BAD_INPUT
    return _emit(text, args.output)


def _serve_out(text: str, output, met: bool, why: str, args: argparse.Namespace) -> int:
    """Write serve's answer; exit 1 when targets were given and are not met."""
    status = _emit(text, output)
    if status == EXIT_OK and not met and (args.tpot or args.ttft):
        print(f"modelcost: the targets are not met: {clean(why)}", file=sys.stderr)
        return EXIT_CHECK_FAILED
    return status


def _serve_disagg(args: argparse.Namespace, spec, hw, engine, layout, estimate,
                  calibration) -> tuple[bool, str, str]:  # fmt: skip
    """`serve --disagg`: a prefill pool and a decode pool (disagg.py), or `--search`
    choosing them within `--devices`; `serve --search --devices N` without `--disagg`:
    aggregated layouts and disaggregated pools within N devices, the better of the two
    (deployment.py); (targets met, why not, the answer). SpecError for flags that do
    not go with it."""
    from .deployment import search_deployment
    from .disagg import parse_pools, search_disagg, serve_disagg
    from .graph import Parallel
    from .render.disagg_format import render_deployment, render_disagg, render_disagg_search

    what = "--disagg" if args.disagg is not None else "--search --devices"
    if args.disagg is None and not args.search:
        raise SpecError("--devices is a search's budget: it goes with --search (aggregated "
                        "and disaggregated) or --disagg --search", filename="modelcost",
                        hint="add --search")  # fmt: skip
    given = (("--mix", args.mix is not None), ("--rate", args.rate is not None),
             ("--speculative", args.speculative),
             (f"the layout flags ({what} chooses the layouts)" if args.search else
              "the layout flags (--disagg gives the pools')", layout != Parallel()))  # fmt: skip
    others = [flag for flag, on in given if on]
    if others:
        raise SpecError(f"{what}: leave out {', '.join(others)}", filename="modelcost",
                        hint="e.g. --disagg 2xtp4:1xtp8" if args.disagg is not None
                        else "e.g. --search --devices 16")  # fmt: skip
    if not (args.isl and args.osl):
        raise SpecError("give --isl and --osl", filename="modelcost")
    objective = args.objective or DEFAULT_OBJECTIVE
    if args.disagg is None:  # both modes within the budget
        if args.concurrency:
            raise SpecError("--search chooses the concurrency too: leave out --concurrency",
                            filename="modelcost")  # fmt: skip
        both = search_deployment(spec, hw, args.isl, args.osl, args.devices, args.tpot,
                                 args.ttft, engine, estimate, calibration, objective,
                                 args.moe_imbalance)  # fmt: skip
        return both.chosen is not None, both.why, render_deployment(both, args.format)
    if args.search:
        if args.disagg or args.concurrency:
            raise SpecError("--search chooses the pools and the concurrency: give --disagg "
                            "without a value and leave out --concurrency",
                            filename="modelcost")  # fmt: skip
        if args.devices is None:
            raise SpecError("--disagg --search needs a device budget", filename="modelcost",
                            hint="--devices N, e.g. --devices 16")  # fmt: skip
        found = search_disagg(spec, hw, args.isl, args.osl, args.devices, args.tpot, args.ttft,
                              engine, estimate, calibration, args.moe_imbalance,
                              objective)  # fmt: skip
        return found.chosen is not None, found.why, render_disagg_search(found, args.format)
    if args.devices is not None:
        raise SpecError("--devices is --disagg --search's budget: the pools give the "
                        "devices", filename="modelcost", hint="leave out --devices")  # fmt: skip
    if not args.disagg:
        raise SpecError("--disagg needs the pools (or --search to choose them)",
                        filename="modelcost", hint="e.g. --disagg 2xtp4:1xtp8")  # fmt: skip
    one = serve_disagg(spec, hw, args.isl, args.osl, parse_pools(args.disagg),
                       args.concurrency, args.tpot, args.ttft, engine, estimate,
                       calibration, args.moe_imbalance)  # fmt: skip
    return one.meets_targets, one.why, render_disagg(one, args.format)


def _speculation(args: argparse.Namespace):
    """serve's speculative decoding (speculative.Speculation), or None; SpecError for
    its options given without --speculative."""
    from .resolve import load_spec
    from .speculative import Speculation

    if not args.speculative:
        given = [f for f, v in (("--draft", args.draft), ("--draft-tokens", args.draft_tokens),
                                ("--acceptance", args.acceptance)) if v is not None]  # fmt: skip
        if given:
            raise SpecError(f"{', '.join(given)} go{'es' if len(given) == 1 else ''} with "
                            "--speculative", filename="modelcost",
                            hint="add --speculative")  # fmt: skip
        return None
    draft = load_spec(args.draft, args.draft_model) if args.draft is not None else None
    tokens = args.draft_tokens if args.draft_tokens is not None else Speculation().tokens
    return Speculation(tokens, args.acceptance, draft)


def _curve_asked(args: argparse.Namespace) -> bool:
    """Whether `serve` answers a curve: several concurrencies, or a client's load."""
    several = args.concurrency is not None and len(args.concurrency) > 1
    return several or args.prompts is not None or args.length_ratio is not None


def _serve_curve(args: argparse.Namespace, spec, hw, engine, layout, estimate,
                 calibration) -> int:  # fmt: skip
    """`serve --concurrency a,b,…` (or --prompts, --length-ratio): a curve a layout under
    a benchmark client's load (curve.py); SpecError for flags that do not go with it."""
    from .curve import BenchLoad, curves
    from .render.curve_format import CURVE_FORMATS, render_curves

    given = (("--rate", args.rate is not None), ("--requests", args.requests is not None),
             ("--mix", args.mix is not None), ("--disagg", args.disagg is not None),
             ("--devices", args.devices is not None), ("--tpot", args.tpot),
             ("--ttft", args.ttft), ("--objective", args.objective is not None),
             ("--speculative", args.speculative))  # fmt: skip
    others = [flag for flag, on in given if on]
    if others:
        raise SpecError(f"a curve runs every concurrency of one request class under a "
                        f"benchmark client's load: leave out {', '.join(others)}",
                        filename="modelcost")  # fmt: skip
    if args.concurrency is None:
        raise SpecError("a curve needs its concurrencies", filename="modelcost",
                        hint="--concurrency 1..512 (doubling), or e.g. 4,16,64")  # fmt: skip
    if not (args.isl and args.osl):
        raise SpecError("give --isl and --osl", filename="modelcost")
    if args.format not in CURVE_FORMATS:
        raise SpecError(f"a curve writes {', '.join(CURVE_FORMATS)}, not {args.format}",
                        filename="modelcost")  # fmt: skip
    load = BenchLoad(prompts=DEFAULT_PROMPTS if args.prompts is None else args.prompts,
                     ratio=1.0 if args.length_ratio is None else args.length_ratio,
                     seed=args.seed or 0)  # fmt: skip
    found = curves(spec, hw, args.isl, args.osl, args.concurrency, load, (layout,), engine,
                   estimate, calibration, args.moe_imbalance, search=args.search)  # fmt: skip
    return _emit(render_curves(found, args.format), args.output)


def _serve_arrivals(args: argparse.Namespace, spec, hw, engine, layout, estimate,
                    calibration) -> int:  # fmt: skip
    """`serve --rate`: requests arriving over time (arrivals.py); SpecError for flags
    that do not go with it."""
    from .arrivals import simulate
    from .render.serving_format import ARRIVAL_FORMATS, render_arrivals

    if args.rate is None:
        raise SpecError("--requests and --seed go with --rate", filename="modelcost",
                        hint="add --rate R, the requests arriving per second")  # fmt: skip
    given = (("--mix", args.mix is not None), ("--search", args.search),
             ("--tpot", args.tpot), ("--ttft", args.ttft),
             ("--speculative", args.speculative))  # fmt: skip
    others = [flag for flag, on in given if on]
    if others:
        raise SpecError(f"--rate simulates one request class: leave out {', '.join(others)}",
                        filename="modelcost")  # fmt: skip
    if args.format not in ARRIVAL_FORMATS:
        raise SpecError(f"--rate writes {', '.join(ARRIVAL_FORMATS)}, not {args.format}",
                        filename="modelcost")  # fmt: skip
    if not (args.isl and args.osl):
        raise SpecError("give --isl and --osl", filename="modelcost")
    n = DEFAULT_REQUESTS if args.requests is None else args.requests
    run = simulate(spec, hw, args.isl, args.osl, args.rate, n, args.seed or 0, layout,
                   engine, args.concurrency, estimate, calibration,
                   args.moe_imbalance)  # fmt: skip
    return _emit(render_arrivals(run, args.format), args.output)


def cmd_import(args: argparse.Namespace) -> int:
    from .importers import import_config

    try:  # what import_config returns compiles (it checks), or it is an error in the config
        text = import_config(read_text(args.config), str(args.config), args.name)
    except SpecError as err:
        _report(err)
        return EXIT_BAD_INPUT
    return _emit(text, args.output)


def cmd_calibrate(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from .calibration import fit, from_tracelens, read_points
    from .hardware import load_hardware

    try:
        hw = load_hardware(args.hw)
        observations = []
        for path in args.measured:
            if str(path).endswith(".csv"):
                observations += from_tracelens(path, hw)
            else:
                observations += read_points(path, hw)
        if not observations:
            raise SpecError(f"no measurement of a GEMM, attention or other op on {hw.name}",
                            filename="modelcost", hint="check --hw")  # fmt: skip
        cal, rows = fit(observations, hw, args.times)
    except SpecError as err:
        _report(err)
        return EXIT_BAD_INPUT
    table = [[r.kind, r.precision, r.points, f"{r.factor:.3f}",
              f"{r.median_error_before:+.0%} → {r.median_error_after:+.0%}",
              f"{r.within_before}/{r.points} → {r.within_after}/{r.points}"]
             for r in rows]  # fmt: skip
    print(f"calibrating the estimate on {hw.name}: {len(observations)} measured ops")
    print(tabulate(table, headers=["kind", "precision", "points", "factor", "median error",
                                   "within ±25 %"]))  # fmt: skip
    if args.output:
        status = _emit(cal.model_dump_json(indent=2) + "\n", args.output)
        if status == EXIT_OK and args.output != "-":
            print(f"wrote {args.output}: use it with --calibrate")
        return status
    return EXIT_OK


def cmd_diff(args: argparse.Namespace) -> int:
    from .diff import diff, gate
    from .hardware import load_hardware
    from .render import render_diff
    from .report import saved_reports
    from .resolve import load_spec

    try:
        saved_a, saved_b = saved_reports(args.a), saved_reports(args.b)
        if saved_a is not None and saved_b is not None:
            _refuse_given(args, "A and B are saved reports: their workloads are their own")
        if (saved_a is None or saved_b is None) and args.hw is None:
            raise SpecError("give --hw: the target a spec is compiled for",
                            filename="modelcost")  # fmt: skip
        if saved_a is not None:
            a = list(saved_a)
        else:
            a = _compile_all(load_spec(args.a), load_hardware(args.hw), args)
        if saved_b is not None:
            b = list(saved_b)
        else:
            hw_b = load_hardware(args.hw_b or args.hw)
            b = _compile_all(load_spec(args.b), hw_b, args, suffix="_b")
        if len(a) != len(b):
            said = {"A": a, "B": b}
            raise SpecError(
                "A and B hold different numbers of phases: "
                + ", ".join(f"{k} {', '.join(r.workload.phase for r in v)}"
                            for k, v in said.items()),
                filename="modelcost",
                hint="--phase-b names B's phases (as many as --phase)",
            )  # fmt: skip
        d = diff(a, b)
    except SpecError as err:
        _report(err)
        return EXIT_BAD_INPUT
    verdict = gate(d, args.fail_above)
    if args.format == "md":
        from .render.formats import diff_markdown_files
        from .render.formats import render_diff as render_md

        mode = _chart_mode(args)
        if mode == "files":
            status = _emit_files(diff_markdown_files(d, args.output, "files", (a, b)), args.output)
        else:
            status = _emit(render_md(d, "md", verdict, mode, sides=(a, b)), args.output)
    elif args.charts:
        return _usage("--charts applies to --format md")
    else:
        status = _emit(render_diff(d, args.format, verdict, (a, b)), args.output)
    if status == EXIT_OK and not verdict.passed:
        print(f"modelcost: {verdict.message}", file=sys.stderr)
        return EXIT_CHECK_FAILED
    return status


_NOT_WORKLOAD = ("a", "b", "func", "command", "format", "output", "fail_above", "charts")


def _refuse_given(args: argparse.Namespace, why: str) -> None:
    """Refuse a workload, layout or costing option given where no side is compiled."""
    defaults = vars(build_parser("diff").parse_args(["diff", args.a, args.b]))
    given = [k for k, v in vars(args).items() if k not in _NOT_WORKLOAD and defaults[k] != v]
    if given:
        flags = ", ".join(f"--{k.replace('_', '-')}" for k in given)
        raise SpecError(f"{flags}: {why}", filename="modelcost",
                        hint="leave the options out, or diff the specs")  # fmt: skip


def cmd_site(args: argparse.Namespace) -> int:
    from .costing import costing
    from .hardware import load_hardware
    from .resolve import load_specs
    from .site import SiteOptions, build_site, foreign_files, write_site

    try:
        specs = []
        for path in args.specs:
            in_file = load_specs(path, root=Path(args.root) if args.root else None)
            for spec in in_file:
                specs.append((Path(path).stem if len(in_file) == 1 else spec.name, spec))
        names = [h.strip() for h in args.hw.split(",") if h.strip()]
        if not names:
            raise SpecError(f"--hw names no target: {args.hw!r}", filename="modelcost",
                            hint="e.g. --hw mi300x,h200")  # fmt: skip
        targets = [load_hardware(h) for h in names]
        diffs = []
        for pair in args.diff:
            a, sep, b = pair.partition(":")
            if not sep or not a or not b:
                raise SpecError(f"--diff takes A:B, got {pair!r}", filename="modelcost")
            diffs.append((a, b))
        estimate, calibration = _estimation(args)
        how = costing(args.conventions, args.peak, args.bandwidth, estimate, calibration,
                      args.engine)  # fmt: skip
        options = SiteOptions(args.batch, args.seq, args.context, _layout(args, SITE_LAYOUT), how)
        files = build_site(specs, targets, diffs, options)
    except SpecError as err:
        _report(err)
        return EXIT_BAD_INPUT
    foreign = [] if args.force else foreign_files(files, Path(args.output))
    if foreign:
        shown = ", ".join(foreign[:5]) + (
            f" and {len(foreign) - 5} more" if len(foreign) > 5 else ""
        )
        print(f"{args.output}: error: would overwrite files that modelcost site did not write: "
              f"{shown}\n  hint: pass --force to replace them, or choose another -o folder",
              file=sys.stderr)  # fmt: skip
        return EXIT_BAD_INPUT
    try:
        removed = write_site(files, Path(args.output), write_text)
    except OSError as exc:
        print(f"{args.output}: error: cannot write: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    gone = f"; removed {len(removed)} it wrote before and no longer writes" if removed else ""
    print(f"wrote {len(files)} files to {args.output}{gone}", file=sys.stderr)
    return EXIT_OK


def _emit(text: str, output: str | None) -> int:
    if output in (None, "-"):
        write_stdout(text)  # closed or a broken pipe: main says so
        return EXIT_OK
    try:
        write_text(output, text)
    except OSError as exc:
        print(f"{output}: error: cannot write: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return EXIT_OK


def cmd_hw_list(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from .hardware import load_hardware, shipped_hardware

    targets = [load_hardware(name) for name in shipped_hardware()]
    if args.format == "json":  # every figure of every target, as `hw show --format json`
        print(json.dumps([h.model_dump(mode="json") for h in targets], indent=2))
        return EXIT_OK
    rows = []
    for h in targets:
        name = h.name
        bf16 = h.peak("matrix", "bf16")[0]
        rows.append([name, h.title, h.arch, _tflops(bf16), f"{h.memory_bandwidth / 1e12:g}",
                     f"{h.capacity / GIB:.1f}", h.capacity_basis])  # fmt: skip
    headers = ["name", "title", "arch", "bf16 TFLOPS", "TB/s", "GiB", "capacity"]
    print(terminal(tabulate(rows, headers=headers)))
    return EXIT_OK


def cmd_zoo(args: argparse.Namespace) -> int:
    """The shipped models by name (a SPEC argument or an `import` may give the name
    alone, from any folder): each file's models, titles and parameters."""
    from tabulate import tabulate

    from .params import count_params
    from .resolve import load_specs
    from .resources import shipped_models

    found = [(name, spec, count_params(spec).total) for name, path in shipped_models().items()
             for spec in load_specs(path)]  # fmt: skip
    if args.format == "json":
        rows = [{"name": name, "model": spec.name, "title": spec.title, "parameters": total}
                for name, spec, total in found]  # fmt: skip
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    table = [[name, spec.name, spec.title, count(total)] for name, spec, total in found]
    print(terminal(tabulate(table, headers=["name", "model", "title", "parameters"])))
    return EXIT_OK


def cmd_hw_show(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from .hardware import load_hardware

    try:
        h = load_hardware(args.name)
    except SpecError as err:
        _report(err)
        return EXIT_BAD_INPUT
    if args.format == "json":
        print(h.model_dump_json(indent=2))
        return EXIT_OK
    print(f"{clean(h.title)} ({h.name}, {clean(h.arch)}, {clean(h.vendor)})")
    datasheet = f"; datasheet {h.memory / GIB:g} GiB" if h.memory_reported else ""
    print(f"HBM {h.capacity / GIB:.1f} GiB ({h.capacity_basis}{datasheet}) "
          f"at {h.memory_bandwidth / 1e12:g} TB/s; "
          f"scale-up {h.scaleup_bandwidth / 1e9:g} GB/s; {h.compute_units} CUs at "
          f"{h.clock / 1e6:g} MHz")  # fmt: skip
    precisions = sorted(set(h.matrix) | set(h.vector) | set(h.achievable.matrix))
    rows = [
        [p, _tflops(h.matrix.get(p)), _tflops(h.achievable.matrix.get(p)), _tflops(h.vector.get(p))]
        for p in precisions
    ]
    print(tabulate(rows, headers=["precision", "matrix TFLOPS", "achievable", "vector TFLOPS"]))
    if h.achievable.source:
        print(f"achievable: {clean(h.achievable.source)}")
    if h.memory_source:
        print(f"memory: {clean(h.memory_source)}")
    return EXIT_OK


def _tflops(value: float | None) -> str:
    return "" if value is None else fixed(value / 1e12, 1)


# the note is what Markdown on stdout gets by itself, not a choice
CHART_MODES_CLI = tuple(m for m in CHART_MODES if m != "note")
CHARTS_HELP = ("Markdown's charts: SVG files beside the page (the default with -o; GitHub "
               "and MkDocs show them), inline SVG (MkDocs renders it, GitHub does not) or "
               "none; without -o, a line says how to get them")  # fmt: skip


SPEC_HELP = "a .model file, or a shipped model's name: llama3-70b (modelcost zoo lists them)"
COMMANDS = ("check", "fmt", "params", "compile", "sweep", "import", "calibrate", "serve",
            "train", "diff", "site", "hw", "zoo", "schema")  # fmt: skip


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser. Given the `command` being run, only its own arguments
    are added: every command is still listed with its help (`modelcost --help`), and a
    command's arguments cost nothing when another one runs."""
    parser = argparse.ArgumentParser(
        prog="modelcost",
        description="Compile .model architecture specs into analytical cost reports.",
    )
    parser.add_argument("--version", action="version", version=f"modelcost {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(
        name: str, func: Callable[[argparse.Namespace], int], help: str
    ) -> argparse.ArgumentParser | None:
        p = sub.add_parser(name, help=help, description=help)
        p.set_defaults(func=func)
        return p if command in (None, name) else None

    if p := add("check", cmd_check, "validate every model of each spec (and .hw hardware files)"):
        p.add_argument("specs", nargs="+", metavar="SPEC")
        p.add_argument("--model", help="check only this model")

    if p := add("fmt", cmd_fmt, "print specs in canonical form"):
        p.add_argument("specs", nargs="+", metavar="SPEC")
        mode = p.add_mutually_exclusive_group()
        mode.add_argument("--check", action="store_true", help="exit 1 if a file is not formatted")
        mode.add_argument("-w", "--write", action="store_true", help="rewrite files in place")

    if p := add("params", cmd_params, "count total and active parameters by component"):
        p.add_argument("spec", metavar="SPEC", help=SPEC_HELP)
        p.add_argument("--model", help="which model, when a file defines several")
        p.add_argument("--format", choices=["text", "json"], default="text")

    if p := add("compile", cmd_compile, "lower, cost and roofline a spec on a hardware target"):
        p.add_argument("spec", metavar="SPEC", help=SPEC_HELP)
        p.add_argument("--model", help="which model, when a file defines several")
        p.add_argument(
            "--hw", required=True, help="a shipped target (modelcost hw list) or a .hw file"
        )
        add_options(p, WORKLOAD + ENGINE + LAYOUT + ROOFLINE + ESTIMATE + MOE)
        p.add_argument(
            "--global-batch",
            dest="batch",
            type=positive,
            default=argparse.SUPPRESS,
            metavar="B",
            help="train: --batch by Megatron's name "
            "(--global-batch-size: sequences a step, over every replica)",
        )
        p.add_argument(
            "--micro-batch",
            type=positive,
            metavar="M",
            help="train: sequences a microbatch, per replica (Megatron's "
            "--micro-batch-size): the microbatches a step follow, --batch / "
            "(dp × M), in place of --microbatches",
        )
        p.add_argument("--only", type=_kinds, default=None, metavar="KINDS",
                       help="count only these op kinds, e.g. GEMM,SDPA")  # fmt: skip
        p.add_argument("--format", choices=list(FORMATS), default="text")
        p.add_argument("--charts", choices=CHART_MODES_CLI, help=CHARTS_HELP)
        p.add_argument(
            "-o", "--output", metavar="FILE", help="write here instead of stdout (- too)"
        )

    if p := add("sweep", cmd_sweep, "one row per combination of specs, targets and option values "
            f"(at most {MAX_POINTS:,} in all; {MAX_STREAMED:,} streamed)"):  # fmt: skip
        p.add_argument("specs", nargs="+", metavar="SPEC", help=SPEC_HELP)
        p.add_argument("--hw", required=True, help="targets, separated by commas")
        add_options(p, ("phase", "batch", "seq", "context", *ENGINE, *LAYOUT), lists=True)
        add_options(p, ROOFLINE + ESTIMATE)
        p.add_argument("--jobs", type=positive, default=1,
                       help="worker processes sharing the points (default 1)")  # fmt: skip
        p.add_argument("--format", choices=SWEEP_FORMATS, default="md",
                       help="csv, jsonl and parquet (pip install 'modelcost[parquet]') are "
                       f"written row by row as the points are computed, up to "
                       f"{MAX_STREAMED:,} points; md, json and html once whole, up to "
                       f"{MAX_POINTS:,} (default md)")  # fmt: skip
        p.add_argument("--quiet", action="store_true",
                       help="no progress line on standard error (there is none when it is "
                       "not a terminal)")  # fmt: skip
        _executor_options(p, "points")
        p.add_argument(
            "-o", "--output", metavar="FILE", help="write here instead of stdout (- too)"
        )

    if p := add("import", cmd_import, "write a .model from a Hugging Face config.json"):
        p.add_argument("config", metavar="config.json")
        p.add_argument("--name", help="the model's name (default: the file's)")
        p.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")

    if p := add("calibrate", cmd_calibrate, "fit the kernel-aware estimate to measured op times"):
        p.add_argument("measured", nargs="+", metavar="FILE",
                       help="measured points (JSON) or TraceLens perf-report CSVs")  # fmt: skip
        p.add_argument("--hw", required=True, help="the hardware they were measured on")
        p.add_argument(
            "--times",
            action="store_true",
            help="also keep each measured shape's time (used where a shape matches)",
        )
        p.add_argument("-o", "--output", metavar="FILE", help="write the calibration here")

    if p := add("serve", cmd_serve, "serving a request mix: concurrency, TTFT, TPOT, throughput"):
        from .speculative import DEFAULT_DRAFT_TOKENS

        p.add_argument("spec", metavar="SPEC", help=SPEC_HELP)
        p.add_argument("--model", help="which model, when a file defines several")
        p.add_argument("--hw", required=True, help="a shipped target or a .hw file")
        p.add_argument("--isl", type=positive, help="input tokens per request")
        p.add_argument("--osl", type=positive, help="output tokens per request")
        p.add_argument("--mix", metavar="FILE", help="several request classes: `ISL OSL [SHARE]` "
                       f"a line, at most {MAX_MIX_CLASSES:,}; SHARE a weight from {SHARES[0]:g} "
                       f"to {SHARES[1]:g} (default 1)")  # fmt: skip
        p.add_argument("--concurrency", type=concurrencies, help="sequences per replica "
                       "(default: the most that fit and meet the targets); several (a,b,c or "
                       f"lo..hi doubling or lo..hi+step, at most {MAX_CURVE_POINTS}): a curve, "
                       "each concurrency under a benchmark client's load (closed loop, "
                       "vLLM's and SGLang's bench_serving --max-concurrency), with --search "
                       "one a layout")  # fmt: skip
        p.add_argument("--prompts", type=requests, metavar="N", help="a curve's requests at "
                       f"each concurrency (bench_serving's --num-prompts; default "
                       f"{DEFAULT_PROMPTS:,}); gives a curve at one --concurrency too")  # fmt: skip
        p.add_argument("--length-ratio", type=length_ratio, metavar="R", help="a curve's "
                       "request lengths drawn uniformly in [R × L, L] for --isl and --osl "
                       "(bench_serving's --random-range-ratio, as SGLang draws it; default 1: "
                       "every request --isl in, --osl out)")  # fmt: skip
        p.add_argument("--tpot", type=seconds, help="time-per-output-token target, e.g. 50ms")
        p.add_argument("--ttft", type=seconds, help="time-to-first-token target, e.g. 500ms")
        p.add_argument("--budget", type=positive, help="chunked prefill: tokens a step (decodes "
                       "and a prompt chunk together); default: static batches")  # fmt: skip
        p.add_argument(
            "--prefix-hit",
            type=_share,
            default=0.0,
            metavar="PCT",
            help="percent of each prompt already in a prefix cache (default 0)",
        )
        p.add_argument("--memory-fraction", type=_fraction, metavar="F",
                       help="the share of memory the engine's rule gives (vLLM: of the device; "
                       "TensorRT-LLM: of what weights and activations leave; SGLang: of the "
                       "device for weights and KV cache); default: the engine's own")  # fmt: skip
        p.add_argument("--search", action="store_true", help="try tp = 1, 2, 4, … (for MoE "
                       "models also the experts over tp × dp; pipelines where tp fills the "
                       "scale-up domain) and choose by --objective among the layouts meeting "
                       "the targets; with --devices N, disaggregated pools within N "
                       "too")  # fmt: skip
        p.add_argument("--objective", choices=OBJECTIVES,
                       help="with --search: what to optimise over the layouts meeting the "
                       "targets: the most output tokens/s per device (NVIDIA AIConfigurator's "
                       "objective), the fewest devices, or the lowest TPOT (default "
                       f"{DEFAULT_OBJECTIVE})")  # fmt: skip
        p.add_argument("--rate", type=rate, metavar="R", help="requests arriving per second "
                       f"(Poisson, {RATES[0]:g} to {RATES[1]:g}): TTFT, TPOT and latency "
                       "percentiles of in-flight batching, simulated step by step (at most "
                       f"{MAX_EVENTS:,} scheduler events and {MAX_STEPS:,} steps: a run "
                       "reaching them stops and says so)")  # fmt: skip
        p.add_argument("--requests", type=requests, metavar="N", help="with --rate: "
                       f"requests to run (default {DEFAULT_REQUESTS:,}, at most "
                       f"{MAX_REQUESTS:,})")  # fmt: skip
        p.add_argument("--seed", type=seed, metavar="S", help="with --rate: the arrivals' "
                       "random seed; with a curve's --length-ratio: the lengths' (default "
                       "0)")  # fmt: skip
        p.add_argument("--speculative", action="store_true", help="speculative decoding: a "
                       "draft proposes tokens, one decode step of the target verifies them "
                       "(static batches); the draft is the model's own multi-token-prediction "
                       "module unless --draft")  # fmt: skip
        p.add_argument("--draft", metavar="FILE.model", help="with --speculative: a draft "
                       "model (the target's vocabulary)")  # fmt: skip
        p.add_argument("--draft-model", metavar="NAME", help="which model of --draft, when it "
                       "defines several")  # fmt: skip
        p.add_argument("--draft-tokens", type=positive, metavar="K", help="with --speculative: "
                       f"tokens proposed a step (default {DEFAULT_DRAFT_TOKENS})")  # fmt: skip
        p.add_argument(
            "--acceptance",
            type=_fraction,
            metavar="A",
            help="with --speculative: "
            "the chance each proposed token is accepted, in (0, 1] (default: the "
            "published acceptance length at K, specs/kernels/speculative.json)",
        )
        p.add_argument("--disagg", nargs="?", const="", metavar="P:D", help="prefill and "
                       "decode on separate pools, each [COUNTx]LAYOUT with the layout's axes "
                       "(tp, dp, ep, etp, pp) written together: `2xtp4:1xtp8` is two prefill "
                       "instances of tp 4 and one decode instance of tp 8; with --search, no "
                       "value: the pools are chosen")  # fmt: skip
        p.add_argument("--devices", type=positive, metavar="N", help="a search's device "
                       "budget: with --search, aggregated layouts and disaggregated pools "
                       "within N devices, the better by --objective; with --disagg --search, "
                       "the pools alone")  # fmt: skip
        p.add_argument("--jobs", type=positive, default=1,
                       help="with --search: worker processes serving a rank count's "
                       "layouts at once (default 1)")  # fmt: skip
        _executor_options(p, "searched layouts")
        add_options(p, SITE_LAYOUT)
        add_options(p, ESTIMATE + MOE, defaults={"estimate": DEFAULT_SERVE_ESTIMATE})
        p.add_argument("--format", choices=("text", "md", "json", "csv", "html"), default="text")
        p.add_argument(
            "-o", "--output", metavar="FILE", help="write here instead of stdout (- too)"
        )

    if p := add("train", cmd_train, "search the training layouts of N devices for the "
                "fastest step (Megatron-LM's: tp, sp, cp, pp, vpp, dp, ep, ZeRO, recompute, "
                "micro-batch)"):  # fmt: skip
        p.add_argument("spec", metavar="SPEC", help=SPEC_HELP)
        p.add_argument("--model", help="which model, when a file defines several")
        p.add_argument(
            "--hw", required=True, help="a shipped target (modelcost hw list) or a .hw file"
        )
        p.add_argument(
            "--devices",
            type=positive,
            required=True,
            metavar="N",
            help="the devices the job runs on: every layout tried uses them all",
        )
        p.add_argument(
            "--global-batch",
            type=positive,
            required=True,
            metavar="B",
            help="sequences a step, over every replica (Megatron's --global-batch-size)",
        )
        p.add_argument(
            "--micro-batch",
            type=counts,
            default=list(TRAIN_MICRO_BATCHES),
            metavar="M",
            help="sequences a microbatch, per replica (Megatron's "
            "--micro-batch-size): the sizes tried, e.g. 1 or 1,2,4 (default "
            f"{','.join(map(str, TRAIN_MICRO_BATCHES))}); the gradient accumulation is "
            "B / (dp × M)",
        )
        add_options(p, ("seq", "overlap", "grads"))
        add_options(p, ("estimate",), defaults={"estimate": DEFAULT_SERVE_ESTIMATE})
        p.add_argument(
            "--top",
            type=positive,
            default=TRAIN_TOP,
            help=f"layouts shown (default {TRAIN_TOP}; json and csv give every one that fits)",
        )
        p.add_argument(
            "--jobs",
            type=positive,
            default=1,
            help="worker processes pricing the layouts (default 1)",
        )
        _executor_options(p, "layouts")
        p.add_argument("--format", choices=("text", "md", "json", "csv", "html"), default="text")
        p.add_argument(
            "-o", "--output", metavar="FILE", help="write here instead of stdout (- too)"
        )

    if p := add("diff", cmd_diff, "compare two specs (or one on two targets or workloads, or "
                "two saved reports)"):  # fmt: skip
        saved = "; or a report saved by compile --format json"
        p.add_argument("a", metavar="A", help=SPEC_HELP + saved)
        p.add_argument("b", metavar="B", help=SPEC_HELP + saved)
        p.add_argument("--hw", help="target of A (and of B unless --hw-b); a saved report "
                       "keeps its own")  # fmt: skip
        p.add_argument("--hw-b", help="target of B")
        add_options(p, WORKLOAD + ENGINE + LAYOUT + ROOFLINE + ESTIMATE + MOE, sides=True)
        p.add_argument("--charts", choices=CHART_MODES_CLI, help=CHARTS_HELP)
        p.add_argument("--format", choices=DIFF_FORMATS, default="text",
                       help="text, md, gfm (a pull-request summary with the gate's verdict), "
                       "html or json")  # fmt: skip
        p.add_argument("--fail-above", type=_percent, metavar="PCT", help="exit 1 when the "
                       "total time grows by more than PCT percent")  # fmt: skip
        p.add_argument("-o", "--output", metavar="FILE")

    if p := add(
        "site", cmd_site, "write a docs site: a page per model × hardware, diffs, an index"
    ):
        p.add_argument("specs", nargs="+", metavar="SPEC", help=SPEC_HELP)
        p.add_argument(
            "--hw", required=True, help="comma-separated targets, e.g. mi300x,mi355x,h200"
        )
        p.add_argument("-o", "--output", required=True, metavar="DIR")
        p.add_argument("--force", action="store_true",
                       help="replace files in DIR that modelcost site did not write")  # fmt: skip
        p.add_argument("--root", metavar="DIR",
                       help="the project's root: no spec or import outside it is read, but "
                       "the shipped models (as the MkDocs plugin's `root:`)")  # fmt: skip
        p.add_argument("--diff", action="append", default=[], metavar="A:B",
                       help="also a diff page of spec A against B (file stems)")  # fmt: skip
        add_options(p, ("batch", "seq", "context", *SITE_LAYOUT, *ROOFLINE, *ESTIMATE))

    hw = sub.add_parser("hw", help="shipped hardware targets", description="hardware targets")
    if command in (None, "hw"):
        hw_sub = hw.add_subparsers(dest="hw_command", required=True, metavar="COMMAND")
        p = hw_sub.add_parser("list", help="list the shipped targets")
        p.add_argument("--format", choices=["text", "json"], default="text")
        p.set_defaults(func=cmd_hw_list)
        p = hw_sub.add_parser("show", help="one target's figures")
        p.add_argument("name", help="a shipped name or a .hw file")
        p.add_argument("--format", choices=["text", "json"], default="text")
        p.set_defaults(func=cmd_hw_show)

    if p := add("zoo", cmd_zoo, "the shipped models: each name works as a SPEC from anywhere"):
        p.add_argument("--format", choices=["text", "json"], default="text")

    if p := add("schema", cmd_schema, "print the JSON Schema of the Spec IR (or of reports)"):
        p.add_argument("--report", action="store_true", help="the schema of compile's JSON")
    return parser


def _negatives_joined(words: list[str]) -> list[str]:
    """`--tpot -5ms` as `--tpot=-5ms`: argparse reads a word starting with `-` (and not
    a plain number) as an option, so a negative value would be told "expected one
    argument"; joined, its option's parser names it (a duration must be positive)."""
    out: list[str] = []
    for word in words:
        if out and re.match(r"-\.?\d", word) and out[-1].startswith("--") and "=" not in out[-1]:
            out[-1] = f"{out[-1]}={word}"
        else:
            out.append(word)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    words = _negatives_joined(sys.argv[1:] if argv is None else list(argv))
    command = words[0] if words and words[0] in COMMANDS else None  # else: all of them
    args = build_parser(command).parse_args(words)
    if sys.stdout is None:  # started with it closed (`>&-`): writing to it is an error
        sys.stdout = ClosedStdout()
    try:
        status = args.func(args)
        sys.stdout.flush()  # a broken pipe shows here, not as a warning at exit
    except BrokenPipeError:  # `modelcost schema | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing more to flush
        return EXIT_OK
    except StdoutClosedError as exc:
        print(f"modelcost: error: cannot write: {exc.strerror}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return status


def run() -> NoReturn:
    """The `modelcost` program (the console script, `python -m modelcost`): `main`, then
    exit with its status. First the objects the command made are moved out of the cyclic
    garbage collector's sight (gc.freeze): the collections the interpreter runs while it
    shuts down would walk every one of them (about 45,000 after compiling DeepSeek-V3),
    a sixth of the command's wall time; reference counting frees them as before."""
    status = main()
    gc.freeze()
    sys.exit(status)


if __name__ == "__main__":
    run()
