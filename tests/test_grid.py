"""Many lengths at once (grid.py, symbolic.py): a layout and batch lowered once with its
length as a variable, each point's totals exactly compile_totals' of that point."""

from __future__ import annotations

import itertools

import pytest
from conftest import MODELS, ZOO
from hypothesis import given, settings
from hypothesis import strategies as st

import modelcost.analyses.changing as changing
import modelcost.analyses.grid as grid
import modelcost.analyses.sweeps as sweeps
from modelcost.analyses.grid import at_lengths, figures_of, length_field
from modelcost.analyses.serving_search import has_experts
from modelcost.analyses.sweeps import SweepRow, plan, run
from modelcost.base.errors import SpecError
from modelcost.base.record import Record, replace
from modelcost.base.symbolic import (
    SymFloat,
    SymInt,
    instantiator,
    length,
    skewed,
    watching,
)
from modelcost.estimate.costing import costing
from modelcost.ir.graph import Parallel, Phase, Workload, settled
from modelcost.language.resolve import load_spec, parse_spec
from modelcost.roofline.compile import compile_totals
from modelcost.roofline.step import add_up
from modelcost.targets.hardware import load_hardware

H100, MI300X = load_hardware("h100"), load_hardware("mi300x")


def _same(got, graph, want) -> bool:
    """Whether a grid point (its lowering's shape, its figures) is what compile says of
    it: every figure of its sweep row bit for bit, and the shape's fields but the length
    (the lowering's shape is one point's; each point's length is in its figures)."""
    shape, figures = got
    lengthless = {"S": 0, "n_kv": 0}
    want_figures = figures_of(graph.shape.seq, graph.shape.n_kv, want)
    # bit for bit: reprs, so 0.0 against −0.0 or 1 against 1.0 differ
    return list(map(repr, figures)) == list(map(repr, want_figures)) and replace(
        shape, **lengthless
    ) == replace(graph.shape, **lengthless)


# ---- the variable -------------------------------------------------------------------


class _Rec(Record, frozen=True):
    n: int
    dims: tuple[int, ...]
    size: float
    name: str = "x"


def test_comparisons_are_kept_as_guards_and_other_uses_escape() -> None:
    x = length(3000)
    with watching() as watch:
        kept = min(x, 4096)  # a sliding window: x > 4096 is False at 3000
    assert kept is x and watch.escaped == 0 and len(watch.guards) == 1
    assert watch.holds(4096) and not watch.holds(4097)  # the window's other side
    with watching() as watch:
        hash(x)  # a dict key: the value escapes, no guard says where it holds
    assert watch.escaped == 1 and not watch.guards


def test_arithmetic_on_the_length_stays_a_function_of_it() -> None:
    x = length(64)
    keys = (x - 1) % 48 + 1  # chunked attention's keys (kinds/attention.py)
    assert isinstance(keys, SymInt) and keys == 16  # (64 − 1) mod 48 + 1
    assert keys._fn(100) == 4  # (100 − 1) mod 48 + 1, as lowering at 100 would say
    half = (x + 8) // 2
    assert half._fn(9) == 8  # (9 + 8) // 2
    size = 3 * x * 2.5  # an int times a float: a float that follows the length
    assert isinstance(size, SymFloat) and size._fn(10) == 75.0
    ratio = 7 / x  # reflected true division
    assert ratio._fn(2) == 3.5
    with watching() as watch:
        decided = -x + 1 == -63  # the comparison decides
    assert decided and watch.decisions == 1


@pytest.mark.parametrize(
    "use",
    [lambda x: x > 3, bool, hash, lambda x: f"{x}", int, float, lambda x: x.bit_length()],
    ids=["compare", "bool", "hash", "format", "int", "float", "int-method"],
)
def test_every_other_use_of_the_value_is_counted_as_a_decision(use) -> None:
    x = length(5)
    with watching() as watch:
        use(x)
    assert watch.decisions > 0


def test_what_c_code_reads_unasked_is_not_seen() -> None:
    # the blind spot grid.at_lengths covers with real lowerings at two more lengths:
    # a plain float raised to the length's power, a range, a float compared with it
    x3, x4 = length(3), length(4)
    with watching() as watch:
        hit = 0.5**x3
        span = len(range(x4))
        below = 2.5 < x3  # noqa: SIM300 (a float on the left: C)
    assert type(hit) is float and hit == 0.125 and span == 4 and below
    assert watch.decisions == 0
    with skewed(1000):  # how grid.py shows such reads: C code gets a number off by 1,000
        x = length(4)
    assert len(range(x)) == 1004 and x + 1 == 5  # while the arithmetic stays true


def test_a_record_is_rebuilt_at_another_length_and_a_fixed_one_is_not() -> None:
    x = length(4)
    rec = _Rec(n=x * 2, dims=(x, 7), size=x * 0.5)
    at = instantiator(rec)
    assert at is not None
    assert at(10) == _Rec(n=20, dims=(10, 7), size=5.0)
    assert instantiator(_Rec(n=3, dims=(1, 2), size=1.0)) is None


def test_sums_add_in_order_on_every_python() -> None:
    # 0.1 added ten times one after another is 0.9999999999999999 (IEEE 754 doubles);
    # Python 3.12's sum() compensates to 1.0: add_up keeps reports equal across versions
    assert add_up([0.1] * 10) == 0.9999999999999999
    assert add_up([2**60, 1, -(2**60)]) == 1  # integers stay exact


# ---- a grid equals compile, point by point ----------------------------------------------

CASES = [  # spec, phase, layout, batch, lengths: decode over contexts, prefill and
    # training over sequences; MoE, MLA, SSM, an encoder-decoder, a vision-language model
    ("llama3-70b", "decode", Parallel(tp=4), 16, range(128, 128 * 33, 128)),
    ("llama3-70b", "decode", Parallel(tp=2, pp=2), 8, range(1000, 60_000, 4000)),
    ("deepseek-v3", "decode", Parallel(tp=8), 32, range(512, 512 * 20, 512)),
    ("deepseek-v3", "decode", Parallel(tp=8, dp=8, ep=8), 64, range(100, 3000, 300)),
    ("mixtral-8x7b", "decode", Parallel(tp=2), 4, range(64, 64 * 20, 64)),
    ("mamba2-2.7b", "decode", Parallel(), 8, range(256, 256 * 12, 256)),
    ("qwen3-next-80b-a3b", "decode", Parallel(tp=4), 8, range(256, 256 * 12, 256)),
    ("t5-base", "decode", Parallel(), 8, range(16, 16 * 12, 16)),
    ("llava-1.5-7b", "decode", Parallel(), 2, range(700, 4000, 300)),
    ("gpt2", "decode", Parallel(), 4, range(128, 128 * 12, 128)),  # past 1024 positions
    ("llama3-8b", "prefill", Parallel(tp=2), 4, range(128, 128 * 16, 128)),
    ("llama3-70b-fp8", "prefill", Parallel(tp=8, sp=True), 2, range(512, 512 * 10, 512)),
    ("llama3-8b", "train", Parallel(tp=2, pp=2, microbatches=4, recompute="full"), 8,
     range(256, 256 * 10, 256)),
    ("llama3-8b", "train", Parallel(dp=2, zero=3, cp=2), 8, range(512, 512 * 10, 512)),
    ("mixtral-8x7b", "train", Parallel(tp=2, ep=2, dp=2), 8, range(256, 256 * 10, 256)),
]  # fmt: skip


@pytest.mark.parametrize("estimate", ["roofline", "kernels"])
@pytest.mark.parametrize(("name", "phase", "par", "batch", "lengths"), CASES,
                         ids=[f"{c[0]}-{c[1]}-{c[2].label or 'one'}" for c in CASES])  # fmt: skip
def test_each_length_is_exactly_what_compile_says_of_it(
    name, phase, par, batch, lengths, estimate
) -> None:
    spec = load_spec(MODELS / f"{name}.model")
    how = costing(estimate=estimate)
    base = Workload(Phase(phase), batch, parallel=par)
    lengths = list(lengths)
    found = at_lengths(spec, H100, base, lengths, how)
    assert found is not None  # these share one lowering
    field = length_field(base)
    for n, got in zip(lengths, found, strict=True):
        w = replace(base, **{field: n})
        try:
            graph, want = compile_totals(spec, H100, w, how)
        except (SpecError, ValueError) as err:
            assert isinstance(got, type(err)) and str(got) == str(err)
            continue
        assert _same(got, graph, want)  # every figure of the row, bit for bit


def test_a_gpt2_context_past_its_positions_is_refused_among_the_others() -> None:
    spec = load_spec(MODELS / "gpt2.model")
    found = at_lengths(spec, H100, Workload(Phase.decode, 4), [512, 1024, 1025, 2048],
                       costing())  # fmt: skip
    assert found is not None
    assert [isinstance(r, tuple) for r in found] == [True, True, False, False]
    assert "exceeds the 1024 learned positions" in str(found[2])


def test_experts_hit_read_unseen_is_computed_one_by_one() -> None:
    # DeepSeek-V3 prefill: the experts hit, E·(1 − ((E − k)/E)^tokens), is a float raised
    # to the length's power, read by C code unseen, caught by the real lowerings at
    # other lengths (grid.at_lengths)
    spec = load_spec(MODELS / "deepseek-v3.model")
    base = Workload(Phase.prefill, 8, parallel=Parallel())
    assert at_lengths(spec, H100, base, list(range(64, 64 * 10, 64)), costing()) is None


@pytest.mark.parametrize(
    ("name", "second"),
    [("gemma2-9b", 9000), ("gpt-oss-120b", 64), ("llama4-scout", 9000)],
)
def test_a_sliding_window_splits_the_contexts_in_two_lowerings(name, second, monkeypatch) -> None:
    # min(context, window) is a comparison: a guard that holds on one side of the window
    # (4,096 for Gemma 2, 128 for gpt-oss, 8,192-token chunks for Llama 4 Scout); the
    # first length on the other side takes a second lowering, and every point equals
    # compile's
    spec = load_spec(MODELS / f"{name}.model")
    base = Workload(Phase.decode, 4, parallel=Parallel())
    lengths = [3000, 64, 9000, 4096, 4097, 12_000, 100, 8192, 8193, 16_000]
    made = []
    template = grid._template
    monkeypatch.setattr(grid, "_template", lambda *a: made.append(a[3]) or template(*a))
    found = at_lengths(spec, H100, base, lengths, costing())
    assert found is not None and made == [3000, second]
    for n, got in zip(lengths, found, strict=True):
        graph, want = compile_totals(spec, H100, replace(base, context=n), costing())
        assert _same(got, graph, want)


def test_a_decode_sweep_over_contexts_compiles_no_point_on_its_own(monkeypatch) -> None:
    # every point comes from the shared lowering: compile_totals is never called
    def refused(*_args, **_kwargs):
        raise AssertionError("a point compiled on its own")

    monkeypatch.setattr(sweeps, "compile_totals", refused)
    big = plan(str(MODELS / "llama3-70b.model"), ["h100", "mi300x"], "decode", [1, 64],
               context=list(range(1024, 1024 * 65, 1024)), layout={"tp": [2, 8]})  # fmt: skip
    rows = [r for r in run(big) if isinstance(r, SweepRow)]
    assert len(rows) == big.size == 2 * 2 * 64 * 2  # targets × batches × contexts × tp
    monkeypatch.undo()
    for r in rows[:: len(rows) // 16]:  # and a sample of them, against compile's rows
        w = Workload(Phase.decode, r.batch, context=r.context, parallel=Parallel(tp=r.devices))
        hw = H100 if r.hardware == H100.name else MI300X
        graph, t = compile_totals(big.specs[0], hw, settled(w), big.how)
        assert r == sweeps.point_row(graph, hw, t)


def test_lengths_in_any_order_are_checked_at_the_shortest_and_longest() -> None:
    # Mixtral's experts hit, 8·(1 − 0.75^tokens), is read unseen (a float's power) and
    # saturates at 8.0 from about 128 tokens: checked only at the middle and last of
    # the list as given (all past 128), seq 16 would take the first length's figure
    spec = load_spec(MODELS / "mixtral-8x7b.model")
    base = Workload(Phase.prefill, 1, parallel=Parallel(tp=2))
    lengths = [2048, 16, 32, 64, 4096, 8192, 16384, 32768]
    assert at_lengths(spec, H100, base, lengths, costing()) is None


def test_a_length_the_workload_refuses_is_skipped_among_the_others() -> None:
    # a context of 0 (the Python API lets it through) is refused as compile refuses it
    big = plan(str(MODELS / "llama3-8b.model"), "h100", "decode", 1,
               context=[1024, 0, 2048, 3072, 4096, 5120, 6144, 7168])  # fmt: skip
    results = list(run(big))
    assert [type(r).__name__ for r in results] == ["SweepRow", "Skip"] + ["SweepRow"] * 6
    assert results[1].why == "context must be a positive integer, got 0"


ORDERS = [list(range(64, 64 * 9, 64)), [2048, 16, 96, 64, 4096, 512, 8192, 128]]


def _lowers(spec, base: Workload, n: int, how) -> bool:
    """Whether compile takes `base` at length `n` (else it refuses it with a SpecError)."""
    try:
        compile_totals(spec, H100, replace(base, **{length_field(base): n}), how)
    except (SpecError, ValueError):
        return False
    return True


@pytest.mark.parametrize("name", [p.stem for p in ZOO])
def test_every_group_the_zoo_shares_equals_compile(name) -> None:
    # the lowering runs with every symbolic value's own number off by a million (grid.SKEW:
    # what C code reads unasked), checked against real lowerings: whatever at_lengths
    # answers (None: each on its own) equals compile at every length, in any order
    spec = load_spec(MODELS / f"{name}.model")
    how = costing()
    for phase, par, lengths in itertools.product(
        ("decode", "prefill", "train"), (Parallel(), Parallel(tp=2, pp=2)), ORDERS
    ):
        base = Workload(Phase(phase), 2, parallel=par)
        found = at_lengths(spec, H100, base, lengths, how)
        if found is None:
            # no shared lowering, so a sweep compiles each length on its own: that is
            # right only where fewer than two lengths lower at all (each refused as
            # compile refuses it: ViT-L/16 takes its length from its image, an encoder
            # has no decode) or where a decision saturates with the length (the experts
            # a batch hits: has_experts)
            lowered = [n for n in lengths if _lowers(spec, base, n, how)]
            assert len(lowered) < 2 or has_experts(spec), (name, phase, par.label)
            continue
        for n, got in zip(lengths, found, strict=True):
            try:
                graph, want = compile_totals(spec, H100, replace(base, **{length_field(base): n}),
                                             how)  # fmt: skip
            except (SpecError, ValueError) as err:
                assert str(got) == str(err)
                continue
            assert _same(got, graph, want), (phase, par.label, n)


# ---- a property: any small model's grid equals compile (issue 36 item 3) -------------


@st.composite
def _small_models(draw) -> str:
    """A small decoder in the .model language: dense or mixture of experts, GQA or MHA,
    gated or plain MLP, one to four layers."""
    d, heads = draw(st.sampled_from([(256, 4), (512, 8), (768, 12)]))
    kv = draw(st.sampled_from([k for k in (1, 2, 4, heads) if heads % k == 0]))
    ff = d * draw(st.sampled_from([2, 3, 4]))
    if draw(st.booleans()):
        experts = draw(st.sampled_from([4, 8]))
        ffn = f"moe({experts}, {draw(st.sampled_from([1, 2]))}, {ff}, act = swiglu)"
    else:
        ffn = f"mlp({ff}, act = {draw(st.sampled_from(['swiglu', 'gelu']))})"
    return (
        f"block layer {{\n rmsnorm\n attention({heads}, {kv}, rope = true)\n residual\n"
        f" rmsnorm\n {ffn}\n residual\n}}\nmodel small {{\n d_model = {d}\n"
        f" vocab = {draw(st.integers(1000, 50_000))}\n embed(vocab)\n"
        f" repeat {draw(st.integers(1, 4))} {{\n  layer\n }}\n rmsnorm\n lm_head(vocab)\n}}\n"
    )


@settings(max_examples=40, deadline=None)
@given(
    text=_small_models(),
    phase=st.sampled_from(["decode", "prefill", "train"]),
    batch=st.sampled_from([1, 2, 4, 8]),
    tp=st.sampled_from([1, 2]),
    lengths=st.lists(st.integers(16, 8192), min_size=2, max_size=6, unique=True),
    estimate=st.sampled_from(["roofline", "kernels"]),
)
def test_any_small_models_grid_equals_compile(text, phase, batch, tp, lengths, estimate) -> None:
    # one lowering evaluated at every length gives, bit for bit, each length's own compile
    # (or its own refusal), whatever the model: the grid has no case of its own to pass
    spec = parse_spec(text)
    how = costing(estimate=estimate)
    base = Workload(Phase(phase), batch, parallel=Parallel(tp=tp))
    try:
        found = at_lengths(spec, H100, base, lengths, how)
    except (SpecError, ValueError):
        return  # a layout the model refuses: compile refuses it too (tested elsewhere)
    if found is None:  # a length read unseen: every point is compiled on its own instead
        return
    field = length_field(base)
    for n, got in zip(lengths, found, strict=True):
        try:
            graph, want = compile_totals(spec, H100, replace(base, **{field: n}), how)
        except (SpecError, ValueError) as err:
            assert isinstance(got, type(err)) and str(got) == str(err)
            continue
        assert _same(got, graph, want)


# ---- arrays: the figures over all the lengths at once (issue 36 item 1) --------------

_FLOATS = st.floats(allow_nan=False, width=64) | st.sampled_from([0.0, -0.0, 1.0, -1.0])


def _bits(v) -> tuple:
    """A float's bits (so 0.0 and −0.0 differ), or the value itself."""
    import struct

    return ("f", struct.pack("<d", v)) if isinstance(v, float) else ("v", v)


@settings(max_examples=200, deadline=None)
@given(a=st.lists(_FLOATS, min_size=1, max_size=8), b=st.lists(_FLOATS, min_size=1, max_size=8))
def test_array_operations_pick_each_element_as_python_does(a, b) -> None:
    # max(0.0, x), min(x, y), x / y or 0, a pick: grid.Arrays on arrays gives, element by
    # element, the very float (sign of zero included) roofline.Scalars gives on one number
    import numpy as np

    from modelcost.roofline.step import SCALARS

    n = min(len(a), len(b))
    x, y = np.array(a[:n]), np.array(b[:n])
    cases = [
        (SCALARS.above_zero, grid.ARRAYS.above_zero, (x,)),
        (SCALARS.smaller, grid.ARRAYS.smaller, (x, y)),
        (SCALARS.ratio, grid.ARRAYS.ratio, (x, y)),
    ]
    for one, many, args in cases:
        got = many(*args).tolist()
        want = [one(*(float(v[i]) for v in args)) for i in range(n)]
        assert list(map(_bits, got)) == list(map(_bits, want))
    picked = grid.ARRAYS.pick(x > y, "compute", "memory").tolist()
    assert picked == [SCALARS.pick(p > q, "compute", "memory")
                      for p, q in zip(a[:n], b[:n], strict=True)]  # fmt: skip


def test_a_watchs_guards_over_an_array_are_its_guards_at_each_length() -> None:
    import numpy as np

    x = length(3000)
    with watching() as watch:
        min(x, 4096)  # a sliding window
        if (x - 1) % 7:  # a truth test
            pass
    lengths = [1, 7, 8, 4095, 4096, 4097, 9000]
    held = watch.holding(np.array(lengths, dtype=object)).tolist()
    assert held == [watch.holds(n) for n in lengths]
    # the window holds to 4,096; (n − 1) mod 7 is nonzero at 3,000, so at 7 and 4,095 too
    assert held == [False, True, False, True, False, False, False]


def test_a_decode_grids_changing_ops_are_costed_once_as_functions(monkeypatch) -> None:
    # Llama 3 70B decode at 64 contexts: its one changing node (the attention over the
    # cache) is costed once with the context a variable and evaluated at every context;
    # only the four checks (first, shortest, middle, longest) cost it at one context
    spec = load_spec(MODELS / "llama3-70b.model")
    sides, single = [], []
    symbolic, one = changing._symbolic_column, changing.node_timed

    def counted(*a):
        sides.append(a[1])
        return symbolic(*a)

    def each(*a):
        single.append(a[0].op.N_KV)  # the attention's keys: its context
        return one(*a)

    monkeypatch.setattr(changing, "_symbolic_column", counted)
    monkeypatch.setattr(changing, "node_timed", each)
    lengths = list(range(1024, 1024 * 65, 1024))
    found = at_lengths(spec, H100, Workload(Phase.decode, 8, parallel=Parallel(tp=8)), lengths,
                       costing())  # fmt: skip
    assert found is not None and sides == [1024]
    assert sorted(single) == [1024, 33 * 1024, 64 * 1024]  # the first is the shortest


def test_the_targets_of_a_sweep_share_one_plan_of_lowerings(monkeypatch) -> None:
    # lowering reads no target: two targets' points at the same layout, batch and
    # contexts take one template (grid._planned keeps it)
    spec = load_spec(MODELS / "llama3-8b.model")
    made = []
    template = grid._template
    monkeypatch.setattr(grid, "_template", lambda *a: made.append(a[3]) or template(*a))
    grid._PLANS.clear()
    base = Workload(Phase.decode, 3, parallel=Parallel())
    lengths = [777, 1500, 2222, 3000]
    for hw in (H100, MI300X):
        found = at_lengths(spec, hw, base, lengths, costing(), share=True)
        for n, got in zip(lengths, found, strict=True):
            graph, want = compile_totals(spec, hw, replace(base, context=n), costing())
            assert _same(got, graph, want)
    assert made == [777]
    grid._PLANS.clear()
    at_lengths(spec, H100, base, lengths, costing())  # one target: nothing kept
    assert made == [777, 777] and not grid._PLANS


def test_a_rows_figures_are_its_last_columns_in_order() -> None:
    # sweeps._values appends a Figures' fields after seq and context: the two orders are
    # one (a field added to one and not the other would shift every row's columns)
    assert grid.Figures._fields[:2] == ("seq", "context")
    assert grid.Figures._fields[2:] == sweeps.COLUMNS[-10:]
    assert sweeps.COLUMNS[4:6] == ("seq", "context")


def test_a_ratio_over_python_numbers_gives_zero_where_python_does() -> None:
    # a training sum of recomputed FLOPs is an array of Python ints (dtype object): at a
    # zero divisor the ratio is 0.0, as Scalars.ratio gives, not Python's ZeroDivisionError
    import numpy as np

    got = grid.ARRAYS.ratio(np.array([10**20, 3], dtype=object), np.array([0.0, 2.0]))
    assert got.tolist() == [0.0, 1.5]  # 3 / 2.0
