"""Stage 2, resolve: AST → Spec IR.

Loads imports (relative to the importing file), follows `extends`, evaluates parameters
and expressions with late binding, expands blocks and repeats, fills dtype defaults per
role, binds layer statements to the built-in vocabulary, and checks everything a spec
can get wrong. Every failure is a SpecError pointing at the culprit.

Its parts: loader.py (files and imports), expressions.py (scopes, arithmetic,
arguments) and roles.py (the dtypes and recipe a scope sets); this module resolves a
model from them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import modelcost.language.spec as ir
import modelcost.language.syntax as s
from modelcost.base.bulk import in_bulk
from modelcost.base.dtypes import DType
from modelcost.base.errors import SpecError, did_you_mean

from .expressions import MAX_DEPTH, Bound, Def, Scope, Symbol, _bind, _coerce, _show, evaluate
from .loader import LoadedFile, Loader, Source, _or_shipped
from .recipes import RECIPES
from .roles import ROLE_CHAIN, role_dtype, role_recipe
from .spec import walk
from .vocabulary import (
    REQUIRED,
    ArgSpec,
    ArgType,
    CheckFailure,
    Derived,
    OpSignature,
    Ref,
    argument_names,
    signatures,
)

MAX_REPEAT = 100_000


MAX_MULTIPLICITY = 10_000_000


# layer statements after block expansion (a `repeat` is not expanded): resolving one
# costs ~25 µs, so the worst accepted model resolves in about half a second
MAX_OPS = 20_000


METADATA = ("title",)


class _Resolver:
    def __init__(self, scope: Scope) -> None:
        self.model_scope = scope
        self.ops = 0
        self.blocks: list[str] = []
        self.multiplicity = 1
        self.width: int | None = None  # the stream's width here (set by an embedding)
        self.streams: dict[str, tuple[ir.Stream, s.Stream]] = {}
        self.in_stream = False
        self.tokens: int | None = None  # a stream's tokens per sequence here

    def body(self, stmts: tuple[s.Stmt, ...], scope: Scope, unit: LoadedFile, top: bool) -> list:
        nodes: list = []
        for stmt in stmts:
            match stmt:
                case s.Assign():
                    if not top:
                        where = "a `stream`" if self.in_stream else "`repeat`"
                        raise unit.src.error(
                            f"assignments are not allowed inside {where}",
                            stmt.pos,
                            "set parameters at the top of the model or block",
                        )
                case s.Repeat():
                    nodes.extend(self.repeat(stmt, scope, unit))
                case s.Stream():
                    if not top or self.blocks or self.in_stream:
                        raise unit.src.error(
                            f"stream `{stmt.name}` is inside another statement",
                            stmt.pos,
                            "declare streams at the top level of a model's body",
                        )
                    nodes.append(self.stream(stmt, scope, unit))
                case s.OpCall():
                    nodes.append(self.call(stmt, scope, unit))
        return nodes

    def repeat(self, stmt: s.Repeat, scope: Scope, unit: LoadedFile) -> list:
        src = unit.src
        count = evaluate(stmt.count, scope, src)
        if isinstance(count, float) and count.is_integer():
            count = int(count)
        if isinstance(count, bool) or not isinstance(count, int):
            raise src.error(
                f"repeat count must be a non-negative integer, got {_show(count)}", stmt.count.pos
            )
        if count < 0:
            raise src.error(f"repeat count must not be negative, got {count}", stmt.count.pos)
        if count > MAX_REPEAT:
            raise src.error(
                f"repeat count {count:,} is too large",
                stmt.count.pos,
                f"repeat counts are bounded by {MAX_REPEAT:,}",
            )
        outer = self.multiplicity
        self.multiplicity *= max(count, 1)
        if self.multiplicity > MAX_MULTIPLICITY:
            raise src.error(
                f"nested repeats multiply to more than {MAX_MULTIPLICITY:,} copies of one layer",
                stmt.count.pos,
            )
        width = self.width
        try:
            body = self.body(stmt.body, scope, unit, top=False)
        finally:
            self.multiplicity = outer
        if width is not None and self.width != width and count > 1:
            raise src.error(
                f"a repeated body must end as wide as it starts: {width} in, {self.width} out",
                stmt.pos,
                "a width change (linear) belongs outside `repeat`",
            )
        if count == 0 or not body:
            return []
        return [ir.Repeat.trusted(count=count, body=tuple(body))]

    STREAM_ARGS = (
        ArgSpec("length", ArgType.DIM, None),
        ArgSpec("joins", ArgType.COUNT, 0),
        ArgSpec("auxiliary", ArgType.BOOL, False),
    )

    def stream(self, stmt: s.Stream, scope: Scope, unit: LoadedFile) -> ir.Stream:
        """Another token stream: its arguments checked, its layers resolved with a width
        of their own, and what the main stream may read of it recorded."""
        src, what = unit.src, f"stream `{stmt.name}`"
        if stmt.name in self.streams:
            raise src.error(f"{what} is declared twice", stmt.pos, "give each stream its own name")
        length, joins, auxiliary, at = self._stream_args(stmt, scope, src, what)
        if auxiliary and (length is not None or joins):
            raise src.error(
                f"{what} is auxiliary: it runs over the main sequence's tokens",
                at("length" if length is not None else "joins"),
                "drop length and joins (an auxiliary stream feeds no other)",
            )
        if not auxiliary and length is None:
            hint = f"stream {stmt.name}(length = tokens per sequence) {{ ... }}"
            raise src.error(f"{what} is missing its argument `length`", stmt.pos, hint)
        outer_width = self.width
        self.width, self.in_stream, self.tokens = outer_width if auxiliary else None, True, length
        try:
            body = self.body(stmt.body, scope, unit, top=False)
        finally:
            width, self.width, self.in_stream = self.width, outer_width, False
            tokens_out, self.tokens = self.tokens, None
        if joins > (tokens_out or 0):
            raise src.error(f"{what} joins {joins} tokens, more than the {tokens_out} it ends with",
                            at("joins"), "joins counts tokens of its own output")  # fmt: skip
        if not body:
            raise src.error(f"{what} has no layers", stmt.pos)
        node = ir.Stream.trusted(
            name=stmt.name,
            length=length or 0,
            joins=joins,
            auxiliary=auxiliary,
            width=width or 0,
            body=tuple(body),
        )
        _check_image_length(node, length, at("length"), src, what)
        self.streams[stmt.name] = (node, stmt)
        return node

    def _stream_args(self, stmt: s.Stream, scope: Scope, src: Source, what: str,
                     ) -> tuple[int | None, int, bool, Callable[[str], s.Pos]]:  # fmt: skip
        """A stream's arguments bound and coerced: (length, joins, auxiliary, where each
        argument was written, or the statement where it was not)."""
        names = [a.name for a in self.STREAM_ARGS]
        call = s.OpCall(stmt.name, stmt.args, True, stmt.pos)
        kinds = {a.name: a.type for a in self.STREAM_ARGS}
        bound = _bind(call, names, names[:2], what, scope, src, kinds)
        v = {a.name: _coerce(a, bound[a.name], what) if a.name in bound else a.default
             for a in self.STREAM_ARGS}  # fmt: skip
        length = v["length"]

        def at(name: str) -> s.Pos:
            return bound[name].pos if name in bound else stmt.pos

        joins = int(v["joins"])  # type: ignore[call-overload]
        return None if length is None else int(length), joins, bool(v["auxiliary"]), at  # type: ignore[call-overload]

    def check_joins(self, body: list, src: Source) -> None:
        """A stream that joins the main sequence ends as wide as the main stream."""
        main = next((op.dim for op, _ in walk(tuple(body), streams=False)), None)
        for node, stmt in self.streams.values():
            if node.joins and main is not None and node.width != main:
                raise src.error(
                    f"stream `{node.name}` ends {node.width} wide, but the main stream it "
                    f"joins is {main} wide",
                    stmt.pos,
                    f"project it: end the stream with linear({main})",
                )
            if (
                not node.joins
                and not node.auxiliary
                and not any(
                    isinstance(op, ir.CrossAttention) and op.source == node.name
                    for op, _ in walk(tuple(body))
                )
            ):
                raise src.error(
                    f"stream `{node.name}` is never read: nothing cross-attends to it and "
                    "it joins no tokens",
                    stmt.pos,
                    f"cross_attention(heads, source = {node.name}), or joins = N",
                )

    def _source(self, values: dict, bound: dict, stmt: s.OpCall, src: Source) -> int:
        """The width of the stream a cross-attention reads (declared above it)."""
        name = values["source"]
        found = self.streams.get(name)
        b = bound.get("source")
        pos, where = (b.pos, b.src) if b else (stmt.pos, src)
        if found is None:
            hint = did_you_mean(name, list(self.streams)) or (
                f"streams declared above: {', '.join(self.streams)}"
                if self.streams
                else "declare `stream encoder(length = N) { ... }` first"
            )
            raise where.error(f"no stream `{name}` to cross-attend to", pos, hint)
        node = found[0]
        if node.joins or node.auxiliary:
            raise where.error(
                f"stream `{name}` joins the main sequence; cross-attention reads an encoder",
                pos,
                "an encoder stream has no `joins`",
            )
        return node.width

    def call(self, stmt: s.OpCall, scope: Scope, unit: LoadedFile):
        if stmt.name in unit.blocks:
            return self.expand_block(stmt, scope, unit)
        sigs = signatures(ir.OP_TYPES)
        if stmt.name in sigs:
            return self.op(sigs[stmt.name], stmt, scope, unit.src)
        hint = did_you_mean(stmt.name, [*sigs, *unit.blocks])
        if stmt.name in unit.models:
            hint = (
                "a model cannot be used as a layer: use `extends`, or move its layers into a block"
            )
        pos = s.Pos(stmt.pos.line, stmt.pos.column, stmt.pos.line, stmt.pos.column + len(stmt.name))
        raise unit.src.error(f"unknown layer `{stmt.name}`", pos, hint)

    def _count_op(self, src: Source, pos: s.Pos) -> None:
        self.ops += 1
        if self.ops > MAX_OPS:
            raise src.error(
                f"the model expands to more than {MAX_OPS:,} layer statements",
                pos,
                "use `repeat` for identical layers: it is not expanded",
            )

    def op(self, sig: OpSignature, stmt: s.OpCall, scope: Scope, src: Source):
        self._count_op(src, stmt.pos)
        what = f"`{sig.name}`"
        accepted = argument_names(sig)
        kinds = dict.fromkeys(accepted, ArgType.DTYPE) | {a.name: a.type for a in sig.args}
        if sig.recipe:
            kinds["recipe"] = ArgType.RECIPE
        bound = _bind(stmt, accepted, [a.name for a in sig.args], what, scope, src, kinds)
        values: dict[str, object] = {}
        # Derived defaults read other arguments, so they are filled in last.
        ordered = sorted(
            sig.args, key=lambda a: isinstance(a.default, Derived) and a.name not in bound
        )
        for spec in ordered:
            if spec.name in bound:
                values[spec.name] = _coerce(spec, bound[spec.name], what)
            elif spec.default is REQUIRED:
                raise src.error(
                    f"{what} is missing its argument `{spec.name}`",
                    stmt.pos,
                    f"{sig.name}({', '.join(a.name for a in sig.args if a.default is REQUIRED)})",
                )
            elif spec.name == "dim" and self.width is not None:
                values["dim"] = self.width  # a layer is as wide as the stream it reads
            elif isinstance(spec.default, Ref):
                found = scope.get(spec.default.name, src, stmt.pos)
                if found is None:
                    raise src.error(
                        f"{what} needs `{spec.name}`, and no `{spec.default.name}` is defined",
                        stmt.pos,
                        f"set `{spec.default.name} = ...` in the model, "
                        f"or pass `{spec.name} = ...`",
                    )
                origin = spec.default.name
                values[spec.name] = _coerce(spec, Bound(found, stmt.pos, src, origin), what)
            elif isinstance(spec.default, Derived):
                try:
                    values[spec.name] = spec.default.fn(values)
                except CheckFailure as fail:
                    raise self._blame(fail, bound, stmt, src) from None
            else:
                values[spec.name] = spec.default
        if sig.check:
            try:
                sig.check(values)
            except CheckFailure as fail:
                raise self._blame(fail, bound, stmt, src) from None
        dtypes = self.dtypes(sig, bound, scope, src, what)
        if sig.ir_type is ir.CrossAttention:
            values["source_dim"] = self._source(values, bound, stmt, src)
        op = sig.ir_type.trusted(**values, dtypes=dtypes)
        self._stream(op, stmt, bound, src, what)
        return op

    def _stream(self, op, stmt: s.OpCall, bound: dict, src: Source, what: str) -> None:
        """Widths agree from layer to layer: an embedding sets the stream's width, a
        linear changes it, every other layer must be as wide as the stream it reads."""
        if not op.starts_stream and self.width is not None and op.dim != self.width:
            b = bound.get("dim")
            raise (b.src if b else src).error(
                f"{what} is {op.dim} wide, but the stream is {self.width} wide here",
                b.pos if b else stmt.pos,
                f"pass dim = {self.width}, or change the stream's width with linear(out)",
            )
        if isinstance(op, ir.TOKEN_OPS):
            self._tokens(op, stmt, bound, src, what)
        if op.width_out is not None:
            self.width = op.width_out

    def _tokens(self, op, stmt: s.OpCall, bound: dict, src: Source, what: str) -> None:
        """Keep, pool and pixel shuffle change a stream's token count: at the top level
        of a stream (not repeated), over a square grid of tokens that divides evenly."""
        if not self.in_stream or self.multiplicity > 1 or self.blocks or self.tokens is None:
            raise src.error(
                f"{what} changes the token count: it belongs at the top of a stream's body",
                stmt.pos,
                "stream image(length = N) { ...; pool(4); ... } (not in a repeat or block)",
            )
        try:
            self.tokens = op.tokens_out(self.tokens)
        except CheckFailure as fail:
            raise self._blame(fail, bound, stmt, src) from None

    @staticmethod
    def _blame(fail: CheckFailure, bound: dict[str, Bound], stmt: s.OpCall, src: Source):
        b = bound.get(fail.arg)
        return (b.src if b else src).error(fail.message, b.pos if b else stmt.pos, fail.hint)

    def dtypes(
        self, sig: OpSignature, bound: dict[str, Bound], scope: Scope, src: Source, what: str
    ) -> ir.DtypePolicy:
        def arg(name: str) -> DType | None:
            if name not in bound:
                return None
            return _coerce(ArgSpec(name, ArgType.DTYPE), bound[name], what)  # type: ignore[return-value]

        chosen: dict[str, object] = {}
        for role, names in ROLE_CHAIN.items():
            explicit = next((d for d in map(arg, names) if d is not None), None)
            chosen[role] = explicit or role_dtype(scope, role, src)
        if not sig.recipe:
            return ir.DtypePolicy.trusted(**chosen)
        if "recipe" in bound:
            name = str(_coerce(ArgSpec("recipe", ArgType.RECIPE), bound["recipe"], what))
        else:
            name = role_recipe(scope, src)
        recipe = RECIPES[name]
        if recipe.weights is not None:  # the recipe stores the linear layers' weights
            chosen["weights"] = recipe.weights
        if recipe.attention and sig.kv_cache and arg("kv_dtype") is None:
            chosen["kv_cache"] = DType.fp8_e4m3  # FP8 attention reads an FP8 cache
        return ir.DtypePolicy.trusted(**chosen, recipe=name)

    def expand_block(self, stmt: s.OpCall, caller: Scope, unit: LoadedFile) -> ir.Block:
        bdef, bunit = unit.blocks[stmt.name]
        src = unit.src
        if stmt.name in self.blocks:
            chain = " → ".join([*self.blocks[self.blocks.index(stmt.name) :], stmt.name])
            raise src.error(f"block recursion: {chain}", stmt.pos, "a block cannot call itself")
        if len(self.blocks) >= MAX_DEPTH:
            raise src.error("blocks are nested too deeply", stmt.pos)
        names = [p.name for p in bdef.params]
        bound = _bind(stmt, names, names, f"block `{bdef.name}`", caller, src)
        defs: dict[str, Def] = {}
        for p in bdef.params:
            if p.name not in bound:
                if p.default is None:
                    raise src.error(
                        f"block `{bdef.name}` is missing its argument `{p.name}`",
                        stmt.pos,
                        f"{bdef.name}({', '.join(names)})",
                    )
                defs[p.name] = Def(p.default, bunit)
        for st in bdef.body:
            if isinstance(st, s.Assign):
                if st.name in names or st.name in defs:
                    raise bunit.src.error(
                        f"`{st.name}` is already a parameter of block `{bdef.name}`", st.pos
                    )
                defs[st.name] = Def(st.value, bunit)
        scope = Scope(defs, self.model_scope, {k: b.value for k, b in bound.items()})
        self.blocks.append(stmt.name)
        try:
            body = self.body(bdef.body, scope, bunit, top=True)
        finally:
            self.blocks.pop()
        return ir.Block.trusted(name=bdef.name, body=tuple(body))


def _check_image_length(node: ir.Stream, length: int | None, pos: s.Pos, src: Source,
                        what: str) -> None:  # fmt: skip
    """A stream with a patch embedding is as long as its image's tokens."""
    patch = next((op for op, _ in walk(node.body) if isinstance(op, ir.PatchEmbed)), None)
    if patch is None or patch.tokens == length:
        return
    raise src.error(
        f"{what} is {patch.tokens} tokens long by its image "
        f"(({patch.image}/{patch.patch})² patches"
        + (" + 1 class token" if patch.cls_token else "")
        + f"), not {length}",
        pos,
        f"length = {patch.tokens}",
    )


def _model_chain(name: str, unit: LoadedFile) -> list[tuple[s.ModelDef, LoadedFile]]:
    """The model and its ancestors, leaf first."""
    chain: list[tuple[s.ModelDef, LoadedFile]] = [unit.models[name]]
    while (m := chain[-1][0]).extends is not None:
        owner = chain[-1][1]
        if m.extends not in owner.models:
            hint = did_you_mean(m.extends, owner.models)
            if m.extends in owner.blocks:
                hint = f"`{m.extends}` is a block; a model can only extend a model"
            raise owner.src.error(f"unknown model `{m.extends}`", m.extends_pos, hint)
        parent = owner.models[m.extends]
        if any(parent[0] is c[0] for c in chain):
            names = " → ".join([*(c[0].name for c in chain), parent[0].name])
            raise owner.src.error(f"`extends` cycle: {names}", m.extends_pos)
        chain.append(parent)
    return chain


def resolve_model(unit: LoadedFile, name: str) -> ir.Spec:
    """Resolve model `name` as seen from `unit` into a Spec."""
    chain = _model_chain(name, unit)
    defs: dict[str, Def] = {}
    inherited: set[str] = set()
    for i, (mdef, munit) in enumerate(reversed(chain)):
        local: set[str] = set()
        for st in mdef.body:
            if isinstance(st, s.Assign):
                if st.name in local:
                    raise munit.src.error(f"`{st.name}` is assigned twice in `{mdef.name}`", st.pos)
                local.add(st.name)
                defs[st.name] = Def(st.value, munit)
        if i < len(chain) - 1:
            inherited |= local
    owner = next((c for c in chain if any(not isinstance(x, s.Assign) for x in c[0].body)), None)
    leaf, leaf_unit = chain[0]
    if owner is None:
        raise leaf_unit.src.error(
            f"model `{leaf.name}` has no layers",
            leaf.name_pos,
            "add layer statements (embed, attention, ...) or `extends` a model that has them",
        )
    scope = Scope(defs)
    resolver = _Resolver(scope)
    body = resolver.body(owner[0].body, scope, owner[1], top=True)
    resolver.check_joins(body, owner[1].src)
    policy = ir.DtypePolicy.trusted(
        **{r: role_dtype(scope, r, leaf_unit.src) for r in ROLE_CHAIN},
        recipe=role_recipe(scope, leaf_unit.src),
    )
    # a title names one model: a child that sets none is labelled by its own name,
    # never with its parent's title
    own_title = any(isinstance(st, s.Assign) and st.name == "title" for st in leaf.body)
    title = scope.get("title", leaf_unit.src, leaf.name_pos) if own_title else None
    if len(chain) > 1:
        _check_unused_overrides(leaf, leaf_unit, scope, inherited)
    params: dict[str, ir.ParamValue] = {}
    for pname, d in defs.items():
        if pname in METADATA:
            continue
        value = scope._value(pname, d.unit.src, d.expr.pos)
        params[pname] = value.name if isinstance(value, Symbol) else value
    if own_title and not isinstance(title, str):
        d = defs["title"]
        raise d.unit.src.error(f"`title` must be a string, got {_show(title)}", d.expr.pos)  # type: ignore[arg-type]
    return ir.Spec.trusted(
        name=leaf.name,
        title=title if isinstance(title, str) else leaf.name,
        params=params,
        dtypes=policy,
        body=tuple(body),
    )


def _check_unused_overrides(leaf: s.ModelDef, unit: LoadedFile, scope: Scope, inherited: set[str]):
    for st in leaf.body:
        if isinstance(st, s.Assign) and st.name not in inherited | scope.used | METADATA_AND_ROLES:
            pos = s.Pos(st.pos.line, st.pos.column, st.pos.line, st.pos.column + len(st.name))
            raise unit.src.error(
                f"`{st.name}` is set but never used",
                pos,
                did_you_mean(st.name, inherited)
                or "a new parameter in a child model must be used by some expression",
            )


METADATA_AND_ROLES = (
    frozenset(METADATA) | {n for names in ROLE_CHAIN.values() for n in names} | {"recipe"}
)


def pick_model(unit: LoadedFile, model: str | None) -> str:
    if model is not None:
        if model not in unit.models:
            hint = did_you_mean(model, unit.models) or (
                f"models here: {', '.join(unit.local_models)}" if unit.local_models else None
            )
            raise SpecError(f"no model named `{model}`", filename=unit.src.filename, hint=hint)
        return model
    if len(unit.local_models) == 1:
        return unit.local_models[0]
    if not unit.local_models:
        raise SpecError(
            "no model is defined in this file",
            filename=unit.src.filename,
            hint="define one with `model NAME { ... }`",
        )
    raise SpecError(
        f"this file defines {len(unit.local_models)} models; choose one",
        filename=unit.src.filename,
        hint=f"pass model= one of: {', '.join(unit.local_models)}",
    )


@in_bulk
def load_specs(path: str | Path, root: Path | None = None) -> list[ir.Spec]:
    """Resolve every model a file defines (not those it imports), in file order; `path`
    may be a shipped model's name (`llama3-70b`). Given a `root`, no file outside it is
    read (Loader)."""
    unit = Loader(root).load_path(_or_shipped(Path(path), path, given=True))
    if not unit.local_models:
        pick_model(unit, None)  # raises the "no model" error
    return [resolve_model(unit, name) for name in unit.local_models]


@in_bulk
def load_spec(path: str | Path, model: str | None = None, root: Path | None = None) -> ir.Spec:
    """Load, resolve and validate the model defined in a `.model` file (or a shipped
    model's, by its name: `llama3-70b`); given a `root`, no file outside it is read."""
    unit = Loader(root).load_path(_or_shipped(Path(path), path, given=True))
    return resolve_model(unit, pick_model(unit, model))


@in_bulk
def parse_spec(text: str, filename: str = "<string>", model: str | None = None) -> ir.Spec:
    """Resolve a spec given as text; imports are relative to `filename`'s folder."""
    path = (
        Path(filename)
        if filename and not filename.startswith("<") and "\0" not in filename
        else None
    )
    unit = Loader().load_text(text, filename, path.resolve() if path else None)
    return resolve_model(unit, pick_model(unit, model))
