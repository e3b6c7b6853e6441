"""A `config.json` read into `.model` text: its JSON scanned for positions and bounds, the
family found by `model_type`, its rules run, refusals and bad values turned into errors
at the field."""

from __future__ import annotations

import json
import math
import re
import textwrap
from collections.abc import Callable
from typing import Any

from modelcost.base.bounds import MAX_NESTING, MAX_NUMBER_CHARS
from modelcost.base.errors import SpecError
from modelcost.base.record import Record
from modelcost.language.fmt import format_source
from modelcost.language.resolve import parse_spec

from .checks import _Bad, _Checked, _quant_method, _show
from .family import GATED, PLAIN, Config, Family
from .mamba_ssm import MAMBA_SSM
from .registry import BY_TYPE


def import_config(text: str, filename: str, name: str | None = None) -> str:
    """The canonical `.model` text of a `config.json` (`name`: the model's, else the
    file's stem). Unknown families, unrepresentable fields and values of the wrong kind
    are SpecErrors that point at the field in the config (its line and column when the
    file has it); the text returned compiles."""
    _scan(text, filename)  # before json: nesting, number sizes, non-finite numbers
    try:
        config = json.loads(text)
    except json.JSONDecodeError as err:
        raise _at(text, filename, err.lineno, err.colno, f"not JSON: {err.msg}") from None
    if not isinstance(config, dict):
        raise SpecError("a config.json holds one JSON object", filename=filename)
    if "schema_version" in config and "reports" in config:
        raise SpecError(
            f"a saved modelcost report (schema_version {_show(config['schema_version'])}), "
            "not a Hugging Face config.json",
            filename=filename,
            hint="`modelcost diff A.json B.json` compares two saved reports; the other "
            "commands read a .model file (or a config.json)",
        )
    model_type = config.get("model_type") or (MAMBA_SSM if "ssm_cfg" in config else None)
    family = BY_TYPE.get(model_type) if isinstance(model_type, str) else None
    if family is None:
        supported = ", ".join(sorted(BY_TYPE))
        raise _field(text, filename, "model_type",
                     f"model_type {_show(model_type)} cannot be imported yet",
                     f"families the importer reads: {supported}")  # fmt: skip
    c = {**family.defaults, **config}
    try:
        if family.prepare is not None:
            c = family.prepare(c)
        return _write(family, c, _Where(text, filename, family.reference), name, config)
    except _Bad as bad:
        raise _field(text, filename, bad.field, bad.message, family.reference) from None


class _Where(Record, frozen=True):
    """The config's text and file, for errors that point into it."""

    text: str
    filename: str
    hint: str


def _write(family: Family, c: Config, where: _Where, name: str | None, config: Config) -> str:
    """The `.model` text: refusals first, then the parameters, blocks and model, each
    read through a `_Checked` mapping (a value of the wrong kind is refused as it is
    read, before any rule uses it)."""
    for field, test, why in family.refuse:
        if _run(test, _Checked(c), where, f"the check of `{field}`"):
            raise _Bad(field, f"`{field}` = {_show(c.get(field))}: {why} cannot be written yet")
    checked = _Checked(c)
    values: list[tuple[str, Any]] = []
    reads: dict[str, list[str]] = {}  # parameter → the fields its rule read
    for pname, rule in family.params:
        before = len(checked.log)
        value = _run(rule, checked, where, f"`{pname}`")
        reads[pname] = checked.log[before:]
        if isinstance(value, bool) or not isinstance(value, int | float):
            culprit = reads[pname][-1] if reads[pname] else pname
            raise _Bad(culprit, f"`{pname}` must come from a number; the config gives "
                       f"{_show(value)}")  # fmt: skip
        values.append((pname, value))
    blocks = _run(family.block_text, checked, where, "the layer")
    model = _run(family.model, checked, where, "the model")
    dtype = _run(_dtype, checked, where, "dtype")
    recipe = _run(lambda m: _recipe(m, family, where.text, where.filename), checked, where,
                  "the recipe")  # fmt: skip
    source = where.filename.rsplit("/", 1)[-1]
    ident = _identifier(name or re.sub(r"\.json$", "", source))
    used = ", ".join(_cite(k, c[k]) for k in sorted(set(checked.log)))
    model_type = c.get("model_type") or MAMBA_SSM
    header = (
        f"Imported from {source} (model_type {model_type}) by `modelcost import`. "
        f"Fields used: {used}. Fields a config omits take the defaults of "
        f"{family.reference}."
    )
    lines = [
        *(f"# {line}" for line in textwrap.wrap(header, 86, break_on_hyphens=False)),
        "",
        *blocks.replace("@layer", f"{ident}_layer").splitlines(),
        "",
        f"model {ident} {{",
        f"title = {_string(_title(config, source))}",
        *(f"{p} = {_number(v)}" for p, v in values),
        f"dtype = {dtype}",
        *([f"recipe = {recipe}"] if recipe else []),
        "",
        *model.replace("@layer", f"{ident}_layer").splitlines(),
        "}",
    ]
    try:  # what it writes must compile
        out = format_source("\n".join(lines) + "\n", "<imported>")
        parse_spec(out, "<imported>")
    except SpecError as err:
        raise _blame(err, {**{f: [f] for f in checked.log}, **reads}, c, where) from None
    return out


def _run(rule: Callable[[Config], Any], c: _Checked, where: _Where, what: str) -> Any:
    """A rule's result; any failure a SpecError at the field it concerns (the last the
    rule read), never a Python exception."""
    try:
        return rule(c)
    except _Bad:
        raise
    except KeyError as err:
        missing = err.args[0] if err.args else None
        last = c.last
        if last is not None and missing == c.get(last):  # a name no table maps
            known = ", ".join(sorted({*GATED, *PLAIN}))
            raise _Bad(last, f"`{last}` = {_show(missing)} is not a name the importer "
                       f"knows (known activations: {known})") from None  # fmt: skip
        if isinstance(missing, str):
            raise SpecError(f"the config lacks `{missing}`, which {what} needs",
                            filename=where.filename, hint=where.hint) from None  # fmt: skip
        raise _Bad(last or "model_type", f"{what} cannot be read ({_show(missing)})") from None
    except (TypeError, ValueError, ArithmeticError, AttributeError, IndexError) as err:
        field = c.last or "model_type"
        raise _Bad(field, f"`{field}` = {_show(c.get(field))} cannot be read: "
                   f"{str(err)[:80]}") from None  # fmt: skip


def _blame(err: SpecError, reads: dict[str, list[str]], c: Config, where: _Where) -> SpecError:
    """An error in the generated text, pointed at the config field behind it: the
    parameter (or field) at the error's column, else the first one its message or its
    line names, and the field that parameter's rule read first."""
    line = err.source_line or ""
    at = re.match(r"\w+", line[max(err.column - 1, 0) :])
    words = [at.group()] if at else []
    words += re.findall(r"\w+", err.message) + re.findall(r"\w+", line)
    for word in words:
        fields = reads.get(word) or []
        if fields:
            field = fields[0]
            return _field(where.text, where.filename, field,
                          f"`{field}` = {_show(c.get(field))}: {_clip(err.message)}",
                          where.hint)  # fmt: skip
    return SpecError(f"the imported model does not compile: {_clip(err.message)}",
                     filename=where.filename, hint=where.hint)  # fmt: skip


def _title(config: Config, source: str) -> str:
    """The model's title: the checkpoint's `_name_or_path` (a hub id as it is, a local
    path by its last part), else its architecture (or model_type) and the file."""
    named = config.get("_name_or_path")
    if isinstance(named, str) and named.strip(" /."):
        named = named.strip().rstrip("/")
        return named.rsplit("/", 1)[-1] if named.startswith(("/", ".", "~")) else named
    archs = config.get("architectures")
    arch = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None
    model_type = config.get("model_type")
    kind = arch or (model_type if isinstance(model_type, str) else MAMBA_SSM)
    return f"{kind} from {source}"


MAX_TITLE = 80  # characters of a title taken from a config


def _string(text: str) -> str:
    """A `.model` string literal of `text`: printable characters only (no control, bidi
    or zero-width ones), at most MAX_TITLE of them, quotes and backslashes escaped."""
    shown = "".join(ch if ch.isprintable() else " " for ch in text)
    shown = " ".join(shown.split())[:MAX_TITLE] or "imported"
    return '"' + shown.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _clip(message: str, limit: int = 200) -> str:
    return message if len(message) <= limit else message[: limit - 1] + "…"


def _dtype(c: Config) -> str:
    """fp16 for a float16 checkpoint; bf16 otherwise (float32 ones are served in bf16)."""
    return "fp16" if c.get("torch_dtype") == "float16" else "bf16"


QUANTIZED = {  # quant_method → the recipe, from the config's own fields
    "fp8": lambda q: "fp8_block" if q.get("weight_block_size") == [128, 128] else "fp8",
    "awq": lambda q: "w4a16" if q.get("bits") == 4 else None,
    "gptq": lambda q: "w4a16" if q.get("bits") == 4 else None,
}


def _recipe(c: Config, family: Family, text: str, filename: str) -> str | None:
    """The precision recipe a checkpoint's quantization_config states (a family that
    quantizes only some layers, gpt-oss's experts, writes its own)."""
    q = c.get("quantization_config")
    if not q or family.quantization:
        return None
    rule = QUANTIZED.get(_quant_method(c) or "")
    recipe = rule(q) if rule else None
    if recipe is None:
        raise _field(text, filename, "quantization_config",
                     f"`quantization_config` = {_show(q, 80)} has no recipe here",
                     "recipes: fp8 (per-tensor or 128×128 blocks), awq/gptq 4-bit; "
                     "or drop it and set `recipe` by hand")  # fmt: skip
    return recipe


def _cite(field: str, value: Any) -> str:
    """`hidden_size 4096`; a long list or mapping by its length."""
    shown = json.dumps(value)
    if isinstance(value, dict | list) and len(shown) > 40:
        return f"{field} ({len(value)} entries)"
    return f"{field} {shown}"


def _number(v: Any) -> str:
    """`128_256`: the zoo's spelling of a large count."""
    return f"{v:_}" if isinstance(v, int) and not isinstance(v, bool) and v >= 10_000 else str(v)


def _identifier(stem: str) -> str:
    ident = re.sub(r"\W", "_", stem).strip("_") or "imported"
    return ident if not ident[0].isdigit() else f"m_{ident}"


MAX_SOURCE_LINE = 200  # a longer line (a config written on one line) is not echoed


def _at(
    text: str, filename: str, line: int, column: int, message: str, hint: str | None = None
) -> SpecError:
    lines = text.splitlines()
    source = lines[line - 1] if 0 < line <= len(lines) else None
    if source is not None and len(source) > MAX_SOURCE_LINE:
        source = None
    return SpecError(message, filename=filename, line=line, column=column, hint=hint,
                     source_line=source)  # fmt: skip


def _at_offset(
    text: str, filename: str, offset: int, message: str, hint: str | None = None, width: int = 1
) -> SpecError:
    line_start = text.rfind("\n", 0, offset) + 1
    err = _at(text, filename, text.count("\n", 0, offset) + 1, offset - line_start + 1,
              message, hint)  # fmt: skip
    err.width = width
    return err


def _field(text: str, filename: str, field: str, message: str, hint: str) -> SpecError:
    """An error pointing at the field's key in the JSON text (a composite config's
    language-model field in its text_config), or at the file when the config omits it."""
    keys = _scan(text, filename)
    for path in (f"text_config.{field}", field):
        if path in keys:
            offset, width = keys[path]
            return _at_offset(text, filename, offset, message, hint, width)
        inside = [keys[k] for k in keys if k.startswith(f"{path}.")]
        if inside:  # a list item (no key of its own): its first key
            offset, width = min(inside)
            return _at_offset(text, filename, offset, message, hint, width)
    return SpecError(message, filename=filename, hint=hint)


# JSON's tokens: strings, punctuation, and any other run (numbers, true, NaN, ...)
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+')


_NOT_FINITE = frozenset({"NaN", "Infinity", "-Infinity"})


def _scan(text: str, filename: str) -> dict[str, tuple[int, int]]:
    """Where each key of the JSON text is (its dotted path, list items by index → its
    offset and width), in one pass without recursion, refusing at its place what
    `json` would choke on or carry silently: nesting deeper than the language's
    MAX_NESTING, number literals longer than its MAX_NUMBER_CHARS, and NaN, Infinity
    or numbers too large for a double (1e400). Malformed JSON is left to `json`."""
    keys: dict[str, tuple[int, int]] = {}
    names: list[str] = []  # per open container: the key or index of the current value
    objects: list[bool] = []  # per open container: an object (else a list)
    expect_key = False
    for m in _JSON_TOKEN.finditer(text):
        tok = m.group()
        first = tok[0]
        if first in "{[":
            if len(objects) >= MAX_NESTING:
                raise _at_offset(text, filename, m.start(), f"the JSON nests more than "
                                 f"{MAX_NESTING} levels deep", "a config.json nests a few "
                                 "levels")  # fmt: skip
            objects.append(first == "{")
            names.append("0")
            expect_key = first == "{"
        elif first in "}]":
            if objects:
                objects.pop()
                names.pop()
            expect_key = False
        elif first == ",":
            if objects and objects[-1]:
                expect_key = True
            elif names:
                names[-1] = str(int(names[-1]) + 1)
        elif first == ":":
            expect_key = False
        elif first == '"':
            if expect_key and objects and objects[-1]:
                try:
                    names[-1] = json.loads(tok)
                except ValueError:
                    names[-1] = tok[1:-1]
                path = ".".join(names)
                if path in keys:  # json would keep the last silently
                    raise _at_offset(text, filename, m.start(), f"duplicate key `{path}`: "
                                     "JSON keeps the last of them", "give each key once",
                                     len(tok))  # fmt: skip
                keys[path] = (m.start(), len(tok))
        else:
            _check_literal(tok, m.start(), names, text, filename)
    return keys


def _check_literal(tok: str, offset: int, names: list[str], text: str, filename: str) -> None:
    """Refuse, at its place, a JSON literal that is not a finite number of a sane size."""
    path = ".".join(names) or "the config"
    shown = tok if len(tok) <= 24 else tok[:23] + "…"
    if tok in _NOT_FINITE or (tok[0] in "-0123456789" and len(tok) <= MAX_NUMBER_CHARS
                              and _overflows(tok)):  # fmt: skip
        raise _at_offset(text, filename, offset, f"`{path}` is {shown}, not a finite number",
                         "a config's numbers are finite; JSON has no NaN or Infinity",
                         min(len(tok), 24))  # fmt: skip
    if tok[0] in "-0123456789" and len(tok) > MAX_NUMBER_CHARS:
        raise _at_offset(text, filename, offset, f"`{path}` is a number of {len(tok):,} "
                         f"characters (the limit is {MAX_NUMBER_CHARS})", None, 24)  # fmt: skip


def _overflows(tok: str) -> bool:
    try:
        return math.isinf(float(tok))
    except ValueError:  # not a number: json reports it
        return False
