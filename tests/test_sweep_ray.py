"""A sweep's points as Ray tasks (issue 24, item 4): on a local Ray instance of two CPUs
the rows equal a local run's, in order; what --executor ray refuses. Needs `ray` (the
dev extra installs it; CI must run this: skipped elsewhere only)."""

import os

import pytest
from conftest import MODELS, run_cli

from modelcost import SpecError, sweep

try:
    import ray
except ImportError:  # pragma: no cover - depends on the machine
    ray = None
if ray is None and os.environ.get("CI"):
    raise RuntimeError("CI must run the Ray test, but ray is not installed: see .ci/run")
pytestmark = pytest.mark.skipif(ray is None, reason="Ray test: ray is not installed")

LLAMA8 = str(MODELS / "llama3-8b.model")
ARGS = {"batch": [1, 2, 4, 8, 16], "context": [1024, 8192, 65536], "layout": {"tp": [1, 2, 3]}}


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.mark.usefixtures("local_ray")
def test_rows_on_ray_equal_a_local_run() -> None:
    # 2 targets × 5 batches × 3 contexts × 3 tp sizes = 90 points; tp 3 does not split
    # Llama's 32 heads: 30 skipped, in both runs alike
    local = sweep(LLAMA8, ["h100", "mi300x"], "decode", **ARGS)
    on_ray = sweep(LLAMA8, ["h100", "mi300x"], "decode", **ARGS, executor="ray")
    assert on_ray == local
    assert len(local.rows) == 60 and len(local.skipped) == 30
    assert ray.is_initialized()  # a cluster it joined is left running


def test_the_cli_streams_from_ray_in_order(tmp_path) -> None:
    flags = ["sweep", LLAMA8, "--hw", "h100", "--phase", "decode", "--batch", "1..64",
             "--context", "1Ki..16Ki", "--format", "csv", "--quiet"]  # fmt: skip
    r = run_cli(*flags, "--executor", "ray", "-o", str(tmp_path / "ray.csv"))
    assert r.returncode == 0, r.stderr
    local = run_cli(*flags)
    assert (tmp_path / "ray.csv").read_text() == local.stdout


@pytest.mark.parametrize(("flags", "message"), [
    (["--address", "auto"], "--address is a Ray cluster's: it goes with --executor ray"),
    (["--executor", "ray", "--jobs", "2"], "--jobs is this machine's worker processes"),
    (["--executor", "ray", "--address", "ray://127.0.0.1:1"], "cannot reach the Ray cluster"),
])  # fmt: skip
def test_what_the_ray_executor_refuses(flags: list[str], message: str) -> None:
    r = run_cli("sweep", LLAMA8, "--hw", "h100", "--phase", "decode", *flags)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr


def test_without_ray_the_error_says_how_to_get_it(monkeypatch) -> None:
    import builtins

    real = builtins.__import__

    def no_ray(name, *args, **kwargs):
        if name == "ray":
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    with pytest.raises(SpecError, match="needs Ray") as err:
        sweep(LLAMA8, "h100", "decode", batch=[1], executor="ray")
    assert "pip install 'modelcost[ray]'" in (err.value.hint or "")


@pytest.mark.usefixtures("local_ray")
def test_a_search_on_ray_or_in_worker_processes_equals_one_in_process() -> None:
    # DeepSeek-V3 on H200: 15 layouts over 1, 2, 4 and 8 ranks (tp, ep over tp × dp,
    # pipelines), each rank count's layouts served at once; the same answer three ways
    from modelcost import search

    spec = str(MODELS / "deepseek-v3.model")
    here = search(spec, "h200", 1000, 1000, tpot=0.05)
    assert search(spec, "h200", 1000, 1000, tpot=0.05, executor="ray") == here
    assert search(spec, "h200", 1000, 1000, tpot=0.05, jobs=2) == here


def test_serve_takes_the_executor_only_for_its_search() -> None:
    r = run_cli("serve", LLAMA8, "--hw", "h100", "--isl", "128", "--osl", "128", "--jobs", "2")
    assert r.returncode == 2 and "--jobs shares out the layouts of `serve --search`" in r.stderr
