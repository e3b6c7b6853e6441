"""The accuracy gate: the estimate is no worse on published measurements than
docs/accuracy.md says it is.

The page's summary (written by `python benchmarks/accuracy.py --write`) publishes, for
each group of points (kernels, serving on one GPU and on several, training), the share
of out-of-sample points whose estimate is within ±25 % of the measurement and the median
|error|. Scoring every point takes a few seconds, so the gate recomputes them all: a
change that makes any group worse fails here until the page is regenerated with it (and
then the page says so, in the same commit). In-sample points (a measurement a figure of
the model was taken from) are never counted: see test_in_sample_marks_are_true.
"""

import importlib.util
import subprocess
import sys
import textwrap

import pytest
from conftest import ROOT

_SPEC = importlib.util.spec_from_file_location("accuracy", ROOT / "benchmarks" / "accuracy.py")
assert _SPEC is not None and _SPEC.loader is not None
acc = importlib.util.module_from_spec(_SPEC)
sys.modules["accuracy"] = acc  # dataclasses look their module up there
_SPEC.loader.exec_module(acc)

PAGE = (ROOT / "docs" / "accuracy.md").read_text(encoding="utf-8")


def test_the_estimate_is_no_worse_than_the_accuracy_page_publishes() -> None:
    scored, _ = acc.score(acc.load())
    was, now = acc.published(PAGE), acc.figures(scored)
    # every group the page publishes, training included
    assert {acc.KERNEL, acc.SINGLE, acc.MULTI, acc.TRAINING} <= set(was)
    assert acc.regressions(was, now) == []
    # and no measurement beats its bound, which the page also says
    assert acc.beaten(scored) == []


def test_the_page_publishes_its_figures_as_the_gate_reads_them() -> None:
    # an invented page: its summary parsed back to exactly the figures it was written from
    def pt(group: str, estimate: float, built: tuple[str, ...] = ()) -> object:
        return acc.Scored(1, group, "h100", "x", "s", 1.0, estimate, 0.5, True, "why", built)

    scored = [pt(acc.KERNEL, 1.1), pt(acc.KERNEL, 1.3), pt(acc.KERNEL, 1.0, ("a rate",)),
              pt(acc.TRAINING, 0.7)]  # fmt: skip
    text = acc.page(scored, [], "abc")
    # kernels: the in-sample point is left out; |errors| 10 % and 30 %: one within ±25 %,
    # median 20 %
    assert acc.published(text)[acc.KERNEL] == acc.Figures(2, 1, 0.2)
    assert acc.published(text)[acc.TRAINING] == acc.Figures(1, 0, 0.3)
    assert acc.published(text) == acc.figures(scored)


@pytest.mark.parametrize(
    ("was", "now", "worse"),
    [
        (acc.Figures(10, 8, 0.1), acc.Figures(10, 8, 0.1), []),
        (acc.Figures(10, 8, 0.1), acc.Figures(10, 9, 0.09), []),  # better passes
        (acc.Figures(10, 8, 0.1), acc.Figures(10, 7, 0.1), ["7/10 within ±25 %"]),
        (acc.Figures(10, 8, 0.1), acc.Figures(10, 8, 0.101), ["median |error| 10.1%"]),
        # a point added: judged by the share, 9/11 (82 %) is above 8/10
        (acc.Figures(10, 8, 0.1), acc.Figures(11, 9, 0.1), []),
        (acc.Figures(10, 8, 0.1), acc.Figures(11, 8, 0.1), ["8/11 within ±25 %"]),
    ],
)
def test_the_gate_fails_on_a_worse_share_or_median_only(was, now, worse) -> None:
    found = acc.regressions({"kernel": was}, {"kernel": now})
    assert len(found) == len(worse)
    assert all(w in f for w, f in zip(worse, found, strict=True))


# every library rate scaled by `scale` before anything reads it, in a fresh interpreter
# (the estimate caches what it derives from the rates); the kernel points scored again
_SCALED = textwrap.dedent(
    """
    import importlib.util, sys
    import modelcost.estimate.kernel_rates as e
    table = e.kernel_table
    def scaled(name):
        t = table(name)
        if name == "library":
            t = dict(t, kernels=[dict(k, tflops=k["tflops"] * {scale}) for k in t["kernels"]])
        return t
    e.kernel_table = scaled
    spec = importlib.util.spec_from_file_location("accuracy", "benchmarks/accuracy.py")
    acc = importlib.util.module_from_spec(spec)
    sys.modules["accuracy"] = acc
    spec.loader.exec_module(acc)
    points = [p for p in acc.load() if p["kind"] in ("gemm", "attention", "bandwidth")]
    was = acc.published(open("docs/accuracy.md", encoding="utf-8").read())
    scored, _ = acc.score(points)
    print(acc.regressions({{"kernel": was["kernel"]}}, acc.figures(scored)))
    """
)


@pytest.mark.parametrize("scale", [0.85, 1.0, 1.10])
def test_the_gate_catches_every_library_rate_scaled(scale) -> None:
    # the finding: scaling every library rate by anything from −15 % to +10 %
    # passed the old "80 % of 114 points" test. The gate takes the real rates and refuses
    # both ends of that range (the kernels' share within ±25 % falls, 80/97 to 78/97 at
    # 0.85 and 76/97 at 1.10, and the median |error| rises)
    r = subprocess.run([sys.executable, "-c", _SCALED.format(scale=scale)], cwd=ROOT,
                       capture_output=True, text=True, check=True, timeout=120)  # fmt: skip
    found = r.stdout.strip()
    if scale == 1.0:
        assert found == "[]"
    else:
        assert "kernel: " in found and "within ±25 %" in found
