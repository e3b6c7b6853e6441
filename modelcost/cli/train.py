"""The `train` command: its arguments and what it runs."""

from __future__ import annotations

import argparse

from modelcost.base.errors import SpecError
from modelcost.base.settings import DEFAULT_SERVE_ESTIMATE, TRAIN_MICRO_BATCHES, TRAIN_TOP

from .common import EXIT_BAD_INPUT, SPEC_HELP, _check_executor, _emit, _executor_options, _report
from .options import add_options
from .values import counts, positive


def cmd_train(args: argparse.Namespace) -> int:
    from modelcost.analyses.training import search_training
    from modelcost.ir.graph import DEFAULT_SEQ
    from modelcost.language.resolve import load_spec
    from modelcost.render.training_format import render_training
    from modelcost.targets.hardware import load_hardware

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


def arguments(p: argparse.ArgumentParser) -> None:
    """`train`'s arguments."""
    p.add_argument("spec", metavar="SPEC", help=SPEC_HELP)
    p.add_argument("--model", help="which model, when a file defines several")
    p.add_argument("--hw", required=True, help="a shipped target (modelcost hw list) or a .hw file")
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
    p.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout (- too)")
