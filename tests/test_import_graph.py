"""The package's import graph runs down its layers, without loops (issue 22, item 1).

Every module of modelcost/ is given a layer below, in the one list of layers; the graph
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

# the layers, bottom to top (DESIGN.md, "Layers of the package"); imports only run down
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("foundation", (
        "record", "frozen", "memo", "bulk", "symbolic", "tabular", "visible", "errors", "files",
        "resources", "bounds", "version", "hooks", "dtypes", "grammar_tables",
    )),
    ("language and perf model", (
        "syntax", "parse", "fmt", "vocabulary", "spec", "recipes", "resolve",
        "hardware", "settings", "perfmodel", "perfmodel.attention", "perfmodel.base",
        "perfmodel.collectives", "perfmodel.conv", "perfmodel.deltanet",
        "perfmodel.elementwise", "perfmodel.gemm", "perfmodel.misc", "perfmodel.moe",
        "perfmodel.norm", "perfmodel.offload", "perfmodel.optimizer", "perfmodel.quant",
        "perfmodel.ring",
        "perfmodel.ssm",
    )),
    ("IR and lowering", (
        "graph", "parallel", "kinds", "kinds.room", "kinds.emit", "kinds.attention",
        "kinds.deltanet", "kinds.embeddings", "kinds.heads", "kinds.mamba2", "kinds.mla",
        "kinds.mlp", "kinds.moe", "kinds.norms", "kinds.pooler", "kinds.tokens",
        "kinds.registry", "params", "memory", "validate", "stages", "lower",
    )),
    ("cost, roofline, estimate, engine", (
        "cost", "costing", "roofs", "roofline", "report", "kernels", "kernel_rates", "gemm_plan",
        "attention_rates", "estimate", "engines",
        "network", "collectives_achieved", "measured", "calibration", "compile", "speculative",
        "executors", "grid",
    )),
    ("analyses", ("diff", "sweeps", "serving_records", "scenario", "serving", "serving_search",
                  "serving_mix", "arrivals", "curve", "pools", "disagg", "deployment",
                  "training")),
    ("render", (
        "render", "render.bars", "render.charts", "render.chart_modes", "render.curve_format",
        "render.diff_text",
        "render.disagg_format", "render.data_format",
        "render.diff_view", "render.env", "render.escape", "render.formats",
        "render.json_format", "render.notebook", "render.palette", "render.serving_format",
        "render.serving_view", "render.sweep_format", "render.sweep_stream",
        "render.sweep_view", "render.table", "render.training_format",
        "render.text", "render.units", "render.view",
    )),
    ("front ends", (
        "", "__main__", "cli", "options",
        "cli.calibrate", "cli.check", "cli.common", "cli.compile", "cli.diff", "cli.fmt",
        "cli.hw", "cli.importing", "cli.params", "cli.schema", "cli.serve", "cli.serve_modes",
        "cli.site", "cli.sweep", "cli.train", "cli.zoo",
        "site", "mkdocs_plugin", "mkdocs_cache",
        "mkdocs_fences", "regen_tables", "progress", "reference",
        "importers", "importers.bert", "importers.checks", "importers.deepseek",
        "importers.family", "importers.gemma", "importers.gemma2", "importers.gemma3",
        "importers.gemma3_text", "importers.gpt2", "importers.gpt_oss", "importers.llama",
        "importers.llama4", "importers.llama4_text", "importers.llava", "importers.mamba2",
        "importers.mamba_ssm", "importers.mixtral", "importers.nemotron_nas", "importers.phi3",
        "importers.qwen2", "importers.qwen2_moe", "importers.qwen3", "importers.qwen3_moe",
        "importers.qwen3_next", "importers.reader", "importers.registry", "importers.t5",
        "importers.vit", "importers.whisper",
    )),
)  # fmt: skip
DOMAIN = tuple(name for name, _ in LAYERS[: [n for n, _ in LAYERS].index("render")])


def _name(short: str) -> str:
    return f"modelcost.{short}" if short else "modelcost"


LAYER = {_name(m): i for i, (_, modules) in enumerate(LAYERS) for m in modules}


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
            # `from . import spec` imports the module modelcost.spec; `from .x import y`
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


def upward(edges: dict[str, dict[str, int]]) -> list[str]:
    return [
        f"{a}:{line} imports {b} ({LAYERS[LAYER[b]][0]}, above {LAYERS[LAYER[a]][0]})"
        for a, targets in sorted(edges.items())
        for b, line in sorted(targets.items())
        if LAYER[b] > LAYER[a]
    ]


def test_every_module_has_a_layer():
    missing = sorted(set(modules()) - set(LAYER))
    assert not missing, (
        f"modules with no layer: {', '.join(missing)}; add each to LAYERS in "
        "tests/test_import_graph.py, at the layer its job belongs to"
    )
    gone = sorted(set(LAYER) - set(modules()))
    assert not gone, f"LAYERS lists modules that do not exist: {', '.join(gone)}"


def test_no_import_loops():
    loops = cycles(graph())
    assert not loops, "import loops:\n" + "\n".join(" ↔ ".join(g) for g in loops)


def test_imports_run_down_the_layers():
    bad = upward(graph())
    assert not bad, "imports up the layers:\n" + "\n".join(bad)


def test_the_domain_never_imports_render():
    edges = graph()
    bad = [
        f"{a} imports {b}"
        for a in edges
        if LAYERS[LAYER[a]][0] in DOMAIN
        for b in edges[a]
        if b == "modelcost.render" or b.startswith("modelcost.render.")
    ]
    assert not bad, "\n".join(bad)


def test_the_checks_see_loops_and_upward_imports(tmp_path):
    """The reader finds what the checks rest on, in a package with one of each: an
    import inside a function (the loop report ↔ render, as on main before item 1), one
    under TYPE_CHECKING, and `from . import x`."""
    pkg = tmp_path / "modelcost"
    (pkg / "render").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from . import errors\n")
    (pkg / "errors.py").write_text("")
    (pkg / "report.py").write_text(
        "from typing import TYPE_CHECKING\nfrom .errors import x\n"
        "if TYPE_CHECKING:\n    from .diff import D\n"
        "def show(r):\n    from .render import render\n    return render(r)\n"
    )
    (pkg / "diff.py").write_text("from .report import Report\n")
    (pkg / "render" / "__init__.py").write_text("from ..report import Report\n")
    edges = graph(pkg)
    assert edges == {
        "modelcost": {"modelcost.errors": 1},
        "modelcost.diff": {"modelcost.report": 1},
        "modelcost.errors": {},
        "modelcost.render": {"modelcost.report": 1},
        "modelcost.report": {"modelcost.errors": 2, "modelcost.diff": 4, "modelcost.render": 6},
    }
    assert cycles(edges) == [["modelcost.diff", "modelcost.render", "modelcost.report"]]
    assert upward(edges) == [  # report is below the analyses (diff) and render
        "modelcost.report:4 imports modelcost.diff (analyses, above cost, roofline, "
        "estimate, engine)",
        "modelcost.report:6 imports modelcost.render (render, above cost, roofline, "
        "estimate, engine)",
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
    """`from .render.notebook import x` runs render/__init__.py before notebook.py: the
    reader adds an edge to the enclosing subpackage, so an upward import in an
    `__init__` is seen (but not a module's edge to its own package)."""
    pkg = tmp_path / "modelcost"
    (pkg / "render").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "report.py").write_text("from .render.notebook import show\n")
    (pkg / "render" / "__init__.py").write_text("")
    (pkg / "render" / "notebook.py").write_text("from .table import t\n")
    (pkg / "render" / "table.py").write_text("")
    edges = graph(pkg)
    assert edges["modelcost.report"] == {"modelcost.render.notebook": 1, "modelcost.render": 1}
    assert edges["modelcost.render.notebook"] == {"modelcost.render.table": 1}
