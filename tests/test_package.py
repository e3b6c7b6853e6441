"""The built wheel carries grammar/, templates/ and specs/, and an installed copy finds them."""

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import ROOT


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(out), str(ROOT)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    (path,) = out.glob("modelcost-*.whl")
    return path


def test_wheel_contains_the_data_folders(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "modelcost/_data/grammar/modelspec.lark" in names
    assert "modelcost/_data/specs/models/llama3-70b.model" in names
    assert "modelcost/cli/__init__.py" in names and "modelcost/cli/serve.py" in names
    assert "modelcost/importers/qwen2.py" in names
    assert "modelcost/language/_tables.marshal" in names  # prebuilt parser tables
    assert "modelcost/_data/templates/report.html.j2" in names
    assert "modelcost/_data/specs/hardware/mi355x.hw" in names
    assert "modelcost/_data/specs/kernels/gluon.json" in names


def test_installed_wheel_finds_its_resources(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    code = (
        "import modelcost, modelcost.base.resources as r\n"
        "print(modelcost.__file__)\n"
        "print(r.grammar_path())\n"
        "spec = modelcost.load_spec(r.specs_dir() / 'models' / 'gpt2.model')\n"
        "print(modelcost.count_params(spec).total)\n"
        "r = modelcost.compile_report(spec, 'mi355x', modelcost.Workload('decode', context=1024))\n"
        "print(len(modelcost.render(r, 'html')) > 10000)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    r = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    module_file, grammar, total, rendered = r.stdout.splitlines()
    assert rendered == "True"  # templates, hardware and the kernel catalog found too
    assert Path(module_file).is_relative_to(site)
    assert Path(grammar) == site / "modelcost" / "_data" / "grammar" / "modelspec.lark"
    assert total == "124439808"  # GPT-2, derived in test_params.py
