"""Sweeps: list and range options, K/M suffixes, one row per point equal to compile's,
and the formats."""

import argparse
import csv
import io

import pytest
from conftest import MODELS, run_cli

from modelcost import SpecError, load_spec
from modelcost.analyses.sweeps import row, sweep
from modelcost.cli.values import counts, positive
from modelcost.ir.graph import Parallel, Phase, Workload
from modelcost.render.sweep_format import render_sweep
from modelcost.roofline.compile import compile_report
from modelcost.targets.hardware import load_hardware

LLAMA8 = load_spec(MODELS / "llama3-8b.model")
H100 = load_hardware("h100")


def test_counts_take_suffixes_lists_and_ranges() -> None:
    # the suffixes of a .model file, with its meaning (issue 38, item 7): K, M powers of
    # 1000, Ki, Mi of 1024: 128K = 128,000 tokens and 128Ki = 131,072
    assert (positive("128K"), positive("128Ki"), positive("1M"), positive("1Mi"),
            positive("2_048"), positive("1.5K")) == (
        128_000, 131_072, 1_000_000, 1_048_576, 2048, 1500,
    )  # fmt: skip
    assert counts("1..256") == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    assert counts("1Ki..8Ki") == [1024, 2048, 4096, 8192]
    assert counts("1K..8K") == [1000, 2000, 4000, 8000]
    assert counts("128..512+128") == [128, 256, 384, 512]
    assert counts("8,1,8,2") == [8, 1, 2]  # each once, in the order given
    for bad in ("0", "8..1", "1..x", "K", "-4", "4k", "1.5", "1.0005K"):
        with pytest.raises(argparse.ArgumentTypeError):
            counts(bad)


def test_every_row_is_what_compile_says_of_the_point() -> None:
    s = sweep([LLAMA8], [H100], [Phase.decode], [1, 8, 64], context=[1024, 32768],
              layout={"tp": [1, 2]})  # fmt: skip
    assert len(s.rows) == 3 * 2 * 2 and not s.skipped
    points = [(b, c, tp) for b in (1, 8, 64) for c in (1024, 32768) for tp in (1, 2)]
    for r, (b, c, tp) in zip(s.rows, points, strict=True):
        w = Workload("decode", b, context=c, parallel=Parallel(tp=tp))
        assert r == row(compile_report(LLAMA8, H100, w))


def test_rows_reuse_nothing_that_differs_between_layouts_and_phases() -> None:
    # what a sweep computes once per spec (stage plan, held parameters) must not leak
    # between pipeline sizes, ZeRO stages, phases or specs: each row against compile
    mixtral = load_spec(MODELS / "mixtral-8x7b.model")
    layout = {"tp": [2], "dp": [2], "ep": [1, 2], "pp": [1, 4], "zero": [0, 3],
              "microbatches": [4]}  # fmt: skip
    s = sweep([mixtral, LLAMA8], [H100], [Phase.train, Phase.prefill], [8], seq=[1024],
              layout=layout)  # fmt: skip
    # 2 phases × 2 ep × 2 pp × 2 zero for Mixtral; Llama has no experts to split by ep 2
    assert len(s.rows) == 16 + 8 and len(s.skipped) == 8
    for r in s.rows:
        spec = mixtral if r.model == mixtral.name else LLAMA8
        # a prefill reads no ZeRO stage, nor microbatches outside a pipeline
        # (validate.READ_BY): its points run without what they do not read
        train, pp = r.phase == Phase.train, 4 if "pp 4" in r.layout else 1
        par = Parallel(tp=2, dp=2, ep=2 if "ep 2" in r.layout else 1,
                       microbatches=4 if train or pp > 1 else 1, pp=pp,
                       zero=3 if "zero 3" in r.layout else 0)  # fmt: skip
        assert train or par.zero == 0
        w = Workload(r.phase, 8, seq=1024, parallel=par)
        assert r.layout == par.label
        assert r == row(compile_report(spec, H100, w))


def test_decode_tokens_per_second_grow_with_batch_while_memory_bound() -> None:
    s = sweep([LLAMA8], [H100], [Phase.decode], counts("1..512"), context=[4096])
    bound = [r for r in s.rows if r.bound == "memory"]
    assert len(bound) >= 5
    rates = [r.tokens_per_s for r in bound]
    assert rates == sorted(rates)


def test_points_a_layout_cannot_run_are_skipped_and_said() -> None:
    gpt2 = load_spec(MODELS / "gpt2.model")
    s = sweep([gpt2], [H100], [Phase.prefill], [1], seq=[1024], layout={"tp": [1, 4, 8]})
    assert [r.layout for r in s.rows] == ["", "tp 4"]
    (why,) = s.skipped
    assert why.endswith("tp 8: --tp 8 does not divide the 12 heads of `attention` of `gpt2`")


def test_points_that_do_not_fit_are_kept_and_marked() -> None:
    spec = load_spec(MODELS / "llama3.1-405b.model")
    s = sweep([spec], [H100], [Phase.decode], [1], layout={"tp": [8, 16]})
    assert [(r.layout, r.fits) for r in s.rows] == [("tp 8", False), ("tp 16", True)]


def test_sweep_cli_formats() -> None:
    spec = str(MODELS / "llama3-8b.model")
    r = run_cli("sweep", spec, "--hw", "h100,mi300x", "--phase", "decode", "--batch",
                "1..4", "--context", "1Ki,128Ki", "--format", "csv")  # fmt: skip
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert len(rows) == 2 * 3 * 2
    assert {row["context"] for row in rows} == {"1024", "131072"}
    md = run_cli("sweep", spec, "--hw", "h100", "--phase", "decode", "--batch", "1,2")
    assert md.returncode == 0 and md.stdout.startswith("| model | hardware |")
    assert md.stdout.count("\n") == 2 + 2
    none = run_cli("sweep", str(MODELS / "gpt2.model"), "--hw", "h100", "--tp", "8")
    assert none.returncode == 2 and "no point of the sweep can run" in none.stderr


def test_json_of_a_sweep_has_its_rows_and_skips() -> None:
    s = sweep([LLAMA8], [H100], [Phase.prefill], [1], seq=[2048], layout={"tp": [3]})
    assert render_sweep(s, "json").startswith('{\n  "rows": [],\n  "skipped": [')


def test_compile_takes_suffixed_counts() -> None:
    r = run_cli("compile", str(MODELS / "llama3-8b.model"), "--hw", "h100", "--phase",
                "decode", "--context", "128Ki", "--format", "json")  # fmt: skip
    assert r.returncode == 0 and '"context": 131072' in r.stdout
    r = run_cli("compile", str(MODELS / "llama3-8b.model"), "--hw", "h100", "--phase",
                "decode", "--context", "128K", "--format", "json")  # fmt: skip
    assert r.returncode == 0 and '"context": 128000' in r.stdout  # as 128K in a spec


def test_python_api_takes_names_single_values_and_ranges() -> None:
    import modelcost as mc

    s = mc.sweep(MODELS / "llama3-8b.model", "h100", "decode", range(1, 5), context=2048,
                 layout={"tp": [1, 2]})  # fmt: skip
    assert len(s.rows) == 4 * 2
    records = s.to_records()
    from modelcost.analyses.sweeps import SweepRow

    assert records[0]["batch"] == 1 and list(records[0]) == list(SweepRow.model_fields)
    text = s.to_csv()
    assert text.splitlines()[0].startswith("model,hardware,phase,batch")
    assert len(text.splitlines()) == 1 + 8
    assert s._repr_markdown_().startswith("| model |")
    assert s._repr_html_().startswith("<!DOCTYPE html>")
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="to_dataframe needs pandas"):
            s.to_dataframe()
    else:
        assert len(s.to_dataframe()) == 8


def test_workers_give_the_same_rows_in_the_same_order() -> None:
    args = ([LLAMA8], [H100], [Phase.decode], [1, 2, 4, 8, 16, 32])
    kw = {"context": [1024, 8192], "layout": {"tp": [1, 2, 3]}}
    one = sweep(*args, **kw)
    two = sweep(*args, **kw, jobs=2)
    assert one == two and len(one.rows) == 6 * 2 * 2 and len(one.skipped) == 6 * 2


def test_the_pareto_front_is_the_points_nothing_beats() -> None:
    from modelcost.render.sweep_view import pareto

    s = sweep([LLAMA8], [H100], [Phase.decode], counts("1..64"), context=[1024, 32768])
    rows = list(s.rows)
    front = pareto(rows)
    for i, r in enumerate(rows):
        # latency: the step, which each decode sequence waits for each output token
        beaten = any(o.tokens_per_s >= r.tokens_per_s and o.step_ms <= r.step_ms
                     and o is not r and (o.tokens_per_s, o.step_ms)
                     != (r.tokens_per_s, r.step_ms) for o in rows)  # fmt: skip
        assert (i in front) == (not beaten)
    # at one context more batch buys throughput for latency: every 1K-context point is
    # on the front, and a 32K point at the same batch is beaten by its 1K twin
    assert all(i in front for i, r in enumerate(rows) if r.context == 1024)


def test_sweep_html_is_deterministic_and_escapes() -> None:
    spec = load_spec(MODELS / "llama3-8b.model").model_copy(update={"name": "<b>x</b>"})
    s = sweep([spec], [H100], [Phase.decode], [1, 2], context=[1024])
    html = render_sweep(s, "html")
    assert html == render_sweep(sweep([spec], [H100], [Phase.decode], [1, 2], context=[1024]),
                                "html")  # fmt: skip
    assert "<b>x</b>" not in html and "&lt;b&gt;x&lt;/b&gt;" in html


def test_a_misspelt_layout_axis_is_refused() -> None:
    with pytest.raises(ValueError, match="layout has no sp, tpp; it takes tp, cp"):
        sweep([LLAMA8], [H100], [Phase.decode], [1], layout={"tpp": [2], "sp": [True]})


def test_engine_options_sweep_like_any_workload_option() -> None:
    # a prompt length belongs to a chunk: the point without one takes none
    s = sweep([LLAMA8], [H100], [Phase.decode], [64], context=[4096],
              engine={"chunk": [0, 512, 2048], "prompt": [2048]})  # fmt: skip
    assert [(r.chunk, r.prompt) for r in s.rows] == [(0, 0), (512, 2048), (2048, 2048)]
    assert not s.skipped
    for r in s.rows:
        w = Workload("decode", 64, context=4096, chunk=r.chunk, prompt=r.prompt)
        assert r == row(compile_report(LLAMA8, H100, w))
    hit = sweep([LLAMA8], [H100], [Phase.prefill], [4], seq=[1024], engine={"prefix": [0, 3072]})
    assert [r.context for r in hit.rows] == [1024, 4096]  # keys: the prefix and the queries


@pytest.mark.parametrize(("phases", "kwargs", "message", "hint"), [
    (["prefill"], {"context": [1024]},
     "--context 1024 applies to decode, and the phases asked for are prefill",
     "add decode to --phase, or leave --context out"),
    (["decode"], {"seq": [512]},
     "--seq 512 applies to prefill and train, and the phases asked for are decode",
     "add prefill to --phase, or leave --seq out"),
])  # fmt: skip
def test_a_length_no_phase_reads_is_refused(phases, kwargs, message, hint) -> None:
    # issue 20, item 17: `--context 1K..128K` with the default prefill phase was silently
    # ignored (80 rows where 1,280 were expected)
    with pytest.raises(SpecError) as err:
        sweep([LLAMA8], [H100], phases, [1], **kwargs)
    assert (err.value.message, err.value.hint) == (message, hint)
    # with a phase that reads it, the same length is swept
    both = sweep([LLAMA8], [H100], [*phases, "train" if "seq" in kwargs else "decode"], [1],
                 **kwargs)  # fmt: skip
    assert len(both.rows) == 2


def test_the_fast_pareto_front_is_the_definitions_with_ties() -> None:
    # n log n (sorted by throughput) against the definition (no other row at least as
    # fast and at most as slow, better in one), on rows drawn with many ties
    import random

    from modelcost.render.sweep_view import pareto

    rng = random.Random(7)
    base = sweep([LLAMA8], [H100], [Phase.decode], [1], context=[1024]).rows[0]
    for _ in range(30):
        rows = [base.model_copy(update={"tokens_per_s": float(rng.randint(1, 6)),
                                        "step_ms": float(rng.randint(1, 6))})
                for _ in range(rng.randint(1, 25))]  # fmt: skip
        want = {i for i, r in enumerate(rows)
                if not any(o.tokens_per_s >= r.tokens_per_s and o.step_ms <= r.step_ms
                           and (o.tokens_per_s, o.step_ms) != (r.tokens_per_s, r.step_ms)
                           for o in rows)}  # fmt: skip
        assert pareto(rows) == want
