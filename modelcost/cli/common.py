"""What several commands share: exit codes, errors as the user sees them, the workload and
layout a command's options give, the estimate asked for, writing results."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from modelcost.analyses.executors import EXECUTORS
from modelcost.base.errors import SpecError
from modelcost.base.files import check_output, write_stdout, write_text
from modelcost.base.settings import estimate_mode
from modelcost.render.chart_modes import CHART_MODES

from .options import ENGINE, LAYOUT

if TYPE_CHECKING:
    from modelcost.ir.graph import Parallel
    from modelcost.render.chart_modes import ChartMode


EXIT_OK, EXIT_CHECK_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def _report(err: SpecError) -> None:
    print(err.render(), file=sys.stderr)


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


def _compile_all(
    spec, hw, args: argparse.Namespace, suffix: str = "", phases: list | None = None
) -> list:
    """One report per requested phase (or `phases`); `suffix` picks the `--X-b`
    overrides of a diff."""
    from modelcost.base.record import replace
    from modelcost.estimate.costing import costing
    from modelcost.ir.graph import Workload
    from modelcost.lowering.validate import check_reads, for_phase, given_options
    from modelcost.roofline.compile import compile_report

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
    from modelcost.base.record import replace
    from modelcost.ir.graph import ONE_DEVICE, Phase

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
    from modelcost.estimate.calibration import load_calibration

    calibration = load_calibration(args.calibrate, hw)
    return estimate_mode(args.estimate, calibration), calibration


def _layout(args: argparse.Namespace, names: Sequence[str], pick: Callable | None = None):
    """The device layout the flags `names` give (`pick` chooses a diff side's)."""
    from modelcost.ir.graph import Parallel

    get = pick or (lambda name: getattr(args, name))
    try:
        return Parallel(**{n: get(n) for n in names if n != "sp"}, sp=args.sp)
    except ValueError as err:  # a layout that cannot be: say why, as any bad input
        raise SpecError(f"{err}", filename="modelcost") from None


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


# the note is what Markdown on stdout gets by itself, not a choice
CHART_MODES_CLI = tuple(m for m in CHART_MODES if m != "note")


CHARTS_HELP = ("Markdown's charts: SVG files beside the page (the default with -o; GitHub "
               "and MkDocs show them), inline SVG (MkDocs renders it, GitHub does not) or "
               "none; without -o, a line says how to get them")  # fmt: skip


SPEC_HELP = "a .model file, or a shipped model's name: llama3-70b (modelcost zoo lists them)"
