"""The package's import graph runs down its folders, without loops (issue 22, item 1;
issue 35, item 1: the folders are the layers).

Every module of modelcost/ is listed below in the folder it sits in, the folders in the
order of the layers; the graph
is read with `ast` from every `import` statement, at module level, inside functions and
under `if TYPE_CHECKING:` alike (a loop that only type checking sees is still a loop
in the design). A module may import its own layer or any layer below it, never one
above; no chain of imports comes back to where it started; the domain never imports
modelcost.render. Measured with these checks on main before this item: 6 loops (report,
diff ↔ render; sweeps ↔ render.sweep_format; serving, arrivals ↔ render.serving_format;
roofline ↔ calibration ↔ measured; spec ↔ vocabulary; resolve ↔ importers) and 14
imports up a layer: of render (report, sweeps, serving, arrivals), of the CLI's
options.py (report, roofline, compile, serving, sweeps, arrivals), of the importer
(resolve), of the report model (hardware) and of the package's top (render's views,
for the version).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "modelcost"

# The folders, bottom to top (docs/development.md, "The tree"), each with its one job and
# the modules it holds (`""` its __init__); imports only run down the list, or within a
# folder. The package's top (`modelcost/__init__.py`, `__main__.py`) is the last.
FOLDERS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("base", "foundation: records, errors, files, memos, settings", (
        "", "record", "frozen", "memo", "bulk", "symbolic", "tabular", "visible", "errors",
        "files", "resources", "bounds", "version", "hooks", "dtypes", "settings",
    )),
    ("language", "the .model language: syntax, parse, resolve, the Spec IR", (
        "", "syntax", "parse", "fmt", "vocabulary", "spec_base", "spec_mixers", "spec_layers",
        "spec", "recipes", "loader", "expressions", "roles",
        "resolve",
        "grammar_tables", "regen_tables",
    )),
    ("perfmodel", "the op vocabulary: FLOPs and bytes of one op", (
        "", "attention", "base", "collectives", "conv", "deltanet", "elementwise", "gemm",
        "misc", "moe", "norm", "offload", "optimizer", "quant", "ring", "ssm",
    )),
    ("ir", "the records between stages: workload, layout, op graph, report", (
        "", "graph", "parallel", "report",
    )),
    ("targets", "what an op runs on: hardware, roofs, interconnects", (
        "", "hardware", "network", "roofs",
    )),
    ("kinds", "a room per layer kind", (
        "", "room", "emit", "attention", "deltanet", "embeddings", "heads", "mamba2", "mla",
        "mlp", "moe", "norms", "pooler", "tokens", "registry",
    )),
    ("lowering", "spec and workload to an op graph, and what it holds", (
        "", "params", "memory", "validate", "stages", "lower",
    )),
    ("estimate", "the kernel-aware estimate: kernels, collectives, engines", (
        "", "kernels", "kernel_rates", "gemm_plan", "attention_rates", "estimate", "engines",
        "collectives_achieved", "measured", "calibration", "costing",
    )),
    ("roofline", "cost and roofline into the report model; the pipeline in one call", (
        "", "cost", "timing", "footprint", "step", "estimated", "roofline", "advice", "compile",
    )),
    ("analyses", "many points: sweeps, diffs, serving, training layouts", (
        "", "speculative", "executors", "arrays", "changing", "grid", "diff", "sweeps",
        "serving_records",
        "scenario", "serving", "serving_search", "serving_mix", "scheduler", "arrivals", "curve",
        "pools",
        "disagg", "deployment", "training",
    )),
    ("render", "formats: text, md, html, json, csv, charts", (
        "", "bars", "charts", "chart_modes", "curve_format", "diff_text", "disagg_format",
        "data_format", "diff_view", "env", "escape", "formats", "json_format", "notebook",
        "palette", "serving_format", "serving_view", "sweep_format", "sweep_stream",
        "sweep_view", "table", "training_format", "text", "units", "view",
    )),
    ("importers", "Hugging Face config.json to .model, one file a family", (
        "", "bert", "checks", "deepseek", "family", "gemma", "gemma2", "gemma3",
        "gemma3_text", "gpt2", "gpt_oss", "llama", "llama4", "llama4_text", "llava", "mamba2",
        "mamba_ssm", "mixtral", "nemotron_nas", "phi3", "qwen2", "qwen2_moe", "qwen3",
        "qwen3_moe", "qwen3_next", "reader", "registry", "t5", "vit", "whisper",
    )),
    ("publish", "reports in documentation: the site, the MkDocs plugin", (
        "", "site", "mkdocs_plugin", "mkdocs_cache", "mkdocs_fences",
    )),
    ("cli", "the command line: a module a command, the options table", (
        "", "values", "options", "progress", "reference", "calibrate", "check", "common", "compile",
        "diff", "fmt", "hw", "importing", "params", "schema", "serve", "serve_modes", "site",
        "sweep", "train", "zoo",
    )),
    ("", "the package's top: the public API", ("", "__main__")),
)  # fmt: skip
# the folders below render: the domain, which never imports it
DOMAIN = tuple(name for name, _, _ in FOLDERS[: [n for n, _, _ in FOLDERS].index("render")])


def _name(folder: str, module: str) -> str:
    return ".".join(["modelcost", *(part for part in (folder, module) if part)])


LAYER = {_name(f, m): i for i, (f, _, modules) in enumerate(FOLDERS) for m in modules}


def modules(root: Path = PACKAGE) -> dict[str, Path]:
    """Every module under `root` (the package modelcost) by its dotted name."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imports(name: str, path: Path, known: dict[str, Path]) -> dict[str, int]:
    """The modelcost modules `name` imports (anywhere in it), each with its first line."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                where = ".".join([*base, node.module] if node.module else base)
            else:
                where = node.module or ""
            # `from . import spec` imports the module modelcost.language.spec; `from .x import y`
            # imports modelcost.x (y a name in it)
            targets = [f"{where}.{a.name}" if f"{where}.{a.name}" in known else where
                       for a in node.names]  # fmt: skip
        for target in targets:
            if target in known and target != name:
                out.setdefault(target, node.lineno)
            # importing modelcost.kinds.room runs modelcost/kinds/__init__.py first: an
            # edge to each enclosing subpackage but the importer's own (and the package
            # top, which Python runs before any of its modules)
            parent = target.rpartition(".")[0]
            while parent.count("."):
                if parent in known and not f"{name}.".startswith(f"{parent}."):
                    out.setdefault(parent, node.lineno)
                parent = parent.rpartition(".")[0]
    return out


def graph(root: Path = PACKAGE) -> dict[str, dict[str, int]]:
    known = modules(root)
    return {name: imports(name, path, known) for name, path in known.items()}


def cycles(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """The import loops: strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def _folder(module: str) -> str:
    """The folder `module` is listed in (`""`: the package's top)."""
    return FOLDERS[LAYER[module]][0] or "the top"


def upward(edges: dict[str, dict[str, int]]) -> list[str]:
    return [
        f"{a}:{line} imports {b} ({_folder(b)}, above {_folder(a)})"
        for a, targets in sorted(edges.items())
        for b, line in sorted(targets.items())
        if LAYER[b] > LAYER[a]
    ]


def unlisted(root: Path = PACKAGE) -> list[str]:
    """The modules under `root` that FOLDERS does not list in the folder they sit in."""
    return sorted(set(modules(root)) - set(LAYER))


def test_every_module_is_listed_in_its_folder():
    missing = unlisted()
    assert not missing, (
        f"modules in no folder's list: {', '.join(missing)}; put each in the folder its "
        "job belongs to and list it there in FOLDERS (tests/test_import_graph.py)"
    )
    gone = sorted(set(LAYER) - set(modules()))
    assert not gone, f"FOLDERS lists modules that do not exist: {', '.join(gone)}"


def test_a_module_in_the_wrong_folder_is_found(tmp_path):
    """serving.py is listed in analyses/: put in base/ (or at the top, as before the
    folders), it is reported; in its own folder it is not."""
    pkg = tmp_path / "modelcost"
    for name in ("__init__.py", "base/__init__.py", "analyses/__init__.py"):
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text("")
    (pkg / "base" / "serving.py").write_text("")
    (pkg / "serving.py").write_text("")
    (pkg / "analyses" / "serving.py").write_text("")
    assert unlisted(pkg) == ["modelcost.base.serving", "modelcost.serving"]


def test_no_import_loops():
    loops = cycles(graph())
    assert not loops, "import loops:\n" + "\n".join(" ↔ ".join(g) for g in loops)


def test_imports_run_down_the_folders():
    bad = upward(graph())
    assert not bad, "imports up the layers:\n" + "\n".join(bad)


def test_the_domain_never_imports_render():
    edges = graph()
    bad = [
        f"{a} imports {b}"
        for a in edges
        if _folder(a) in DOMAIN
        for b in edges[a]
        if b == "modelcost.render" or b.startswith("modelcost.render.")
    ]
    assert not bad, "\n".join(bad)


def test_the_checks_see_loops_and_upward_imports(tmp_path):
    """The reader finds what the checks rest on, in a package of folders with one of
    each: an import inside a function (the loop report ↔ render, as on main before
    item 1), one under TYPE_CHECKING, and `from .base import errors`."""
    pkg = tmp_path / "modelcost"
    files = {
        "__init__.py": "from .base import errors\n",
        "base/__init__.py": "",
        "base/errors.py": "",
        "ir/__init__.py": "",
        "ir/report.py": (
            "from typing import TYPE_CHECKING\nfrom ..base.errors import x\n"
            "if TYPE_CHECKING:\n    from ..analyses.diff import D\n"
            "def show(r):\n    from ..render import render\n    return render(r)\n"
        ),
        "analyses/__init__.py": "",
        "analyses/diff.py": "from ..ir.report import Report\n",
        "render/__init__.py": "from ..ir.report import Report\n",
    }
    for name, text in files.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text)
    edges = graph(pkg)
    # an import of modelcost.ir.report runs modelcost/ir/__init__.py first: an edge to
    # the enclosing folder too, but not from a module of that folder
    assert edges == {
        "modelcost": {"modelcost.base": 1, "modelcost.base.errors": 1},
        "modelcost.analyses": {},
        "modelcost.analyses.diff": {"modelcost.ir": 1, "modelcost.ir.report": 1},
        "modelcost.base": {},
        "modelcost.base.errors": {},
        "modelcost.ir": {},
        "modelcost.ir.report": {
            "modelcost.base": 2,
            "modelcost.base.errors": 2,
            "modelcost.analyses": 4,
            "modelcost.analyses.diff": 4,
            "modelcost.render": 6,
        },
        "modelcost.render": {"modelcost.ir": 1, "modelcost.ir.report": 1},
    }
    assert cycles(edges) == [["modelcost.analyses.diff", "modelcost.ir.report", "modelcost.render"]]
    assert upward(edges) == [  # report is below the analyses (diff) and render
        "modelcost.ir.report:4 imports modelcost.analyses (analyses, above ir)",
        "modelcost.ir.report:4 imports modelcost.analyses.diff (analyses, above ir)",
        "modelcost.ir.report:6 imports modelcost.render (render, above ir)",
    ]


@pytest.mark.parametrize("fmt", ["html", "md"])
def test_a_report_shows_itself_in_a_notebook(fmt):
    """In a fresh interpreter, after only `import modelcost`: a report's notebook display
    (the render layer's, through hooks) is its rendered page, and render is loaded by
    the display, not before."""
    method = {"html": "_repr_html_", "md": "_repr_markdown_"}[fmt]
    code = (
        "import sys, modelcost\n"
        "spec = modelcost.load_spec('specs/models/gpt2.model')\n"
        "r = modelcost.compile_report(spec, modelcost.load_hardware('mi300x'), "
        "modelcost.Workload(modelcost.Phase.decode, 1, context=1024))\n"
        "assert 'modelcost.render' not in sys.modules\n"
        f"shown = r.{method}()\n"
        f"assert shown == modelcost.render(r, {fmt!r}), 'not the rendered page'\n"
        "print(len(shown))\n"
    )
    root = PACKAGE.parent
    env = {**os.environ, "PYTHONPATH": str(root)}  # this tree's modelcost
    run = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True,
                         text=True, env=env)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert int(run.stdout) > 1000  # a whole page


def test_a_subpackages_init_counts_as_imported(tmp_path):
    """`from ..render.notebook import x` runs render/__init__.py before notebook.py: the
    reader adds an edge to the enclosing subpackage, so an upward import in an
    `__init__` is seen (but not a module's edge to its own package)."""
    pkg = tmp_path / "modelcost"
    (pkg / "render").mkdir(parents=True)
    (pkg / "ir").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "ir" / "__init__.py").write_text("")
    (pkg / "ir" / "report.py").write_text("from ..render.notebook import show\n")
    (pkg / "render" / "__init__.py").write_text("")
    (pkg / "render" / "notebook.py").write_text("from .table import t\n")
    (pkg / "render" / "table.py").write_text("")
    edges = graph(pkg)
    assert edges["modelcost.ir.report"] == {"modelcost.render.notebook": 1, "modelcost.render": 1}
    assert edges["modelcost.render.notebook"] == {"modelcost.render.table": 1}
