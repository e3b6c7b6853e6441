"""A layer kind in one room (modelcost/kinds): every kind of the `Op` union has a
complete room, the rooms' refusals hold (Gated DeltaNet's among them), and
docs/contributing.md's worked example, run as the doc writes it, compiles BERT to the
same report as the shipped pooler."""

import dataclasses
import re
import subprocess
import sys
import typing

import pytest
from conftest import MODELS, ROOT, run_cli

from modelcost import load_spec, parse_spec
from modelcost.base.errors import SpecError
from modelcost.ir.graph import Parallel, Phase, Workload
from modelcost.kinds import registry
from modelcost.kinds.room import (
    NOTHING_KEPT,
    Component,
    Feature,
    Memory,
    Refusal,
    Room,
)
from modelcost.language import spec as ir
from modelcost.language import spec_layers
from modelcost.language.spec import walk
from modelcost.language.vocabulary import signatures
from modelcost.lowering.lower import lower
from modelcost.lowering.params import count_params
from modelcost.render import render
from modelcost.roofline.compile import compile_report

QWEN3_NEXT = MODELS / "qwen3-next-80b-a3b.model"


def test_every_kind_of_the_op_union_has_a_complete_room() -> None:
    kinds = typing.get_args(ir.Op)
    assert len(kinds) == len(ir.OP_TYPES) == 24 and set(kinds) == set(ir.OP_TYPES)
    assert set(registry.ROOMS) == set(kinds)  # no room for a kind the union lacks either
    for kind in kinds:
        room = registry.ROOMS[kind]
        assert room.kind is kind
        for f in dataclasses.fields(Room):
            assert getattr(room, f.name) is not None, (kind.__name__, f.name)
        for part in (room.lower, room.params, room.active, room.sharding):
            assert callable(part), kind.__name__
        assert isinstance(room.component, Component)
        assert isinstance(room.memory, Memory)
        assert all(callable(getattr(room.memory, f.name)) for f in dataclasses.fields(Memory))
        assert isinstance(room.refuses, tuple)
        assert all(isinstance(r, Refusal) and r.why for r in room.refuses)
        features = [r.feature for r in room.refuses]
        assert len(features) == len(set(features)), kind.__name__


def test_a_room_and_its_memory_have_no_defaults() -> None:
    """Nothing is said for a kind by leaving it out: each part is given (NO_PARAMS,
    NOTHING_KEPT, REPLICATED, REFUSES_NOTHING where there is nothing to say)."""
    for cls in (Room, Memory, Refusal):
        for f in dataclasses.fields(cls):
            assert f.default is dataclasses.MISSING, (cls.__name__, f.name)
            assert f.default_factory is dataclasses.MISSING, (cls.__name__, f.name)


def test_the_kinds_that_keep_something_across_decode_steps() -> None:
    """Attention, cross-attention and MLA keep a KV cache; Mamba-2 and Gated DeltaNet a
    recurrent state; every other kind says NOTHING_KEPT."""
    keeping = {k for k, r in registry.ROOMS.items() if r.memory is not NOTHING_KEPT}
    assert keeping == {ir.Attention, ir.CrossAttention, ir.MLA, ir.Mamba2, ir.GatedDeltaNet}


def test_the_refusals_by_kind() -> None:
    """MLA refuses a prefill chunk and a prefix cache (it up-projects cached latents);
    Mamba-2 and Gated DeltaNet those, context parallelism (a scan carries its state
    along the whole sequence) and a speculative verify's several tokens per sequence in
    a decode step (the state steps one token at a time); every other kind refuses
    nothing."""
    refusing = {k: {r.feature for r in room.refuses} for k, room in registry.ROOMS.items()
                if room.refuses}  # fmt: skip
    every = {Feature.chunk, Feature.prefix, Feature.cp, Feature.queries}
    assert refusing == {
        ir.MLA: {Feature.chunk, Feature.prefix},
        ir.Mamba2: every,
        ir.GatedDeltaNet: every,
    }


def test_qwen3_next_refuses_a_chunked_decode_step() -> None:
    """Its Gated DeltaNet layers carry their state through a chunk: not costed as
    attention's (it was accepted before, the delta rule priced as if not there)."""
    r = run_cli("compile", str(QWEN3_NEXT), "--hw", "mi355x", "--phase", "decode",
                "--chunk", "512")  # fmt: skip
    assert r.returncode == 2
    assert r.stdout == ""
    assert r.stderr == (
        "modelcost: error: a prefill chunk is modelled for attention layers; "
        "`qwen3_next_80b_a3b` has a GatedDeltaNet layer (the delta rule carries its "
        "state through a chunk)\n  hint: leave out --chunk and --prefix for this model\n"
    )
    assert "Traceback" not in r.stderr


def test_qwen3_next_refuses_a_prefix_cache_and_context_parallelism() -> None:
    spec = load_spec(QWEN3_NEXT)
    with pytest.raises(SpecError, match=r"a prefix cache is modelled for attention layers; "
                       r"`qwen3_next_80b_a3b` has a GatedDeltaNet layer"):  # fmt: skip
        lower(spec, Workload(Phase.prefill, 1, 1024, prefix=512))
    with pytest.raises(SpecError) as cp:
        lower(spec, Workload(Phase.prefill, 1, 1024, parallel=Parallel(cp=2)))
    assert cp.value.message == (
        "--cp 2: the delta rule's scan of `gated_deltanet` of `qwen3_next_80b_a3b` runs "
        "along the whole sequence"
    )
    assert cp.value.hint == "context parallelism is for attention layers; use --tp or --dp"


def test_gated_deltanet_splits_by_heads_or_refuses() -> None:
    spec = parse_spec("model m { d_model = 256\n  gated_deltanet(2, 4)\n}\n")
    with pytest.raises(SpecError) as tp:
        lower(spec, Workload(Phase.prefill, 4, 64, parallel=Parallel(tp=4)))
    assert tp.value.message == "--tp 4 does not divide the 2 key heads of `gated_deltanet` of `m`"
    lower(spec, Workload(Phase.prefill, 4, 64, parallel=Parallel(tp=2)))  # 1 and 2 per rank


# ---- docs/contributing.md's worked example, run as written there


def _doc_blocks() -> list[str]:
    text = (ROOT / "docs" / "contributing.md").read_text()
    guide = text[: text.index("# Contributing: adding an importer family")]
    return re.findall(r"```python\n(.*?)```", guide, re.S)


def test_the_guides_room_is_the_shipped_pooler_file() -> None:
    declaration, room_file = _doc_blocks()
    assert room_file == (ROOT / "modelcost" / "kinds" / "pooler.py").read_text()
    assert "class Pooler(_Op):" in declaration
    registry_text = (ROOT / "modelcost" / "kinds" / "registry.py").read_text()
    assert "        pooler.POOLER,\n" in registry_text  # step 3's line


def test_the_guides_worked_example_compiles_bert_as_the_shipped_pooler(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The doc's declaration and room, executed as written, stand in for the shipped
    `pooler`: BERT resolves to the doc's class, and its reports (prefill and training)
    are the shipped pooler's, byte for byte."""
    declaration, room_file = _doc_blocks()
    bert = MODELS / "bert-base-uncased.model"
    shipped_params = count_params(load_spec(bert)).total
    shipped = [compile_report(load_spec(bert), "mi355x", Workload(phase, 4, 128))
               for phase in (Phase.prefill, Phase.train)]  # fmt: skip

    spec_ns = dict(vars(spec_layers))  # spec_layers.py's names: _Op, Arg, T, Literal, ...
    exec(declaration, spec_ns)
    doc_pooler = spec_ns["Pooler"]
    assert doc_pooler is not ir.Pooler
    room_ns = {"__name__": "modelcost.kinds.doc_pooler", "__package__": "modelcost.kinds"}
    exec(room_file, room_ns)
    room = dataclasses.replace(room_ns["POOLER"], kind=doc_pooler)

    types = tuple(doc_pooler if t is ir.Pooler else t for t in ir.OP_TYPES)
    monkeypatch.setattr(ir, "OP_TYPES", types)
    monkeypatch.delitem(registry.ROOMS, ir.Pooler)
    monkeypatch.setitem(registry.ROOMS, doc_pooler, room)
    signatures.cache_clear()
    try:
        spec = load_spec(bert)
        pooled = [op for op, _ in walk(spec.body) if op.kind == "pooler"]
        assert [type(op) for op in pooled] == [doc_pooler]
        # BertPooler: Linear(768, 768) with bias, 768 · 768 + 768 = 590,592 parameters
        assert room.params(pooled[0], 1, 1) == (590_592, 0)
        assert count_params(spec).total == shipped_params == 109_482_240  # BertModel (HF)
        reports = [compile_report(spec, "mi355x", Workload(phase, 4, 128))
                   for phase in (Phase.prefill, Phase.train)]  # fmt: skip
        assert render(reports, "json") == render(shipped, "json")
    finally:
        signatures.cache_clear()


def test_a_kind_without_a_room_stops_the_import() -> None:
    """The registry names a kind of OP_TYPES it has no room for when it loads, rather
    than `modelcost check` crashing later."""
    code = (
        "import modelcost.language.spec as ir\n"
        "class Extra(ir.Residual):\n    pass\n"
        "ir.OP_TYPES = (*ir.OP_TYPES, Extra)\n"
        "import modelcost.kinds.registry\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 1
    assert "layer kinds without a room in modelcost/kinds/registry.py: ['Extra']" in r.stderr


def test_the_kinds_package_imports_only_down() -> None:
    """The rooms sit in "IR and lowering": they import the Spec IR, the perf model, the
    graph, the sharding rules and the foundation, never costing, the roofline, rendering
    or the CLI (nor the modules that dispatch through the registry)."""
    import ast

    allowed = {"language.spec", "base.dtypes", "base.errors", "ir.graph", "ir.parallel",
               "perfmodel", "language.recipes", "base.record", "kinds"}  # fmt: skip
    for path in sorted((ROOT / "modelcost" / "kinds").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                package = ["modelcost", "kinds"][: 3 - node.level]  # `.`: kinds, `..`: modelcost
                if node.module:
                    modules = [".".join([*package, node.module])]
                else:
                    modules = [".".join([*package, a.name]) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                modules = [node.module or ""]
            elif isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            else:
                continue
            for module in modules:
                parts = module.split(".")
                if parts[0] == "modelcost":
                    assert parts[1] in allowed or ".".join(parts[1:3]) in allowed, (
                        path.name,
                        module,
                    )
