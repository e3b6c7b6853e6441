"""Hostile config.json files: every bad value the importer can meet is refused at its
field (the JSON's line and column), fast and briefly, through `import` and through
every command that takes a config.json in place of a .model; never a traceback, a hang
or an error placed in the generated text (issue 20, items 12 and 14)."""

import json
import time
from pathlib import Path

import pytest
from conftest import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st
from test_import import GEMMA3_27B, LLAMA4_SCOUT

from modelcost import SpecError, parse_spec
from modelcost.base.bounds import MAX_NESTING, MAX_NUMBER_CHARS
from modelcost.importers import import_config
from modelcost.importers.checks import MAX_LAYERS
from modelcost.importers.family import MAX_PATTERN, _period
from modelcost.importers.registry import BY_TYPE

CONFIGS = Path(__file__).parent / "data" / "hf-configs"
LLAMA = json.loads((CONFIGS / "llama3-8b.json").read_text())
GEMMA2 = json.loads((CONFIGS / "gemma2-9b.json").read_text())


def _refusal(config: dict | str, name: str = "c.json") -> SpecError:
    """The SpecError importing `config` raises (indented JSON, as configs are saved)."""
    text = config if isinstance(config, str) else json.dumps(config, indent=2)
    with pytest.raises(SpecError) as err:
        import_config(text, name)
    return err.value


def _line_of(config: dict, field: str) -> int:
    """The 1-based line of `"field":` in the indented JSON of `config`."""
    lines = json.dumps(config, indent=2).splitlines()
    return next(i for i, line in enumerate(lines, 1) if line.lstrip().startswith(f'"{field}"'))


# ---------------------------------------------------------------- the cases, exactly


@pytest.mark.parametrize(
    ("base", "field", "value", "message"),
    [
        # item 12: 0 key-value heads was read as "unset" and became multi-head attention
        (LLAMA, "num_key_value_heads", 0,
         "`num_key_value_heads` must be a positive whole number, got 0"),
        # item 12: the language's own check, now at the config field: 32 heads in 3 groups
        (LLAMA, "num_key_value_heads", 3,
         "`num_key_value_heads` = 3: kv_heads = 3 does not divide heads = 32"),
        # item 14: each of these raised a Python exception or hung
        (LLAMA, "quantization_config", "fp8", '`quantization_config` must be an object, got "fp8"'),
        (LLAMA, "quantization_config", [1], "`quantization_config` must be an object, got [1]"),
        (LLAMA, "hidden_act", ["silu"], '`hidden_act` must be a name (a string), got ["silu"]'),
        (LLAMA, "num_hidden_layers", 0,
         "`num_hidden_layers` must be a positive whole number, got 0"),
        (LLAMA, "num_hidden_layers", -1,
         "`num_hidden_layers` must be a positive whole number, got -1"),
        # MAX_LAYERS is the language's bound on a repeat count (resolve.MAX_REPEAT)
        (LLAMA, "num_hidden_layers", 10**9, "`num_hidden_layers` = 1,000,000,000: an import "
         "writes at most 100,000 layers (the language's bound on a repeat count)"),
        (GEMMA2, "layer_types", [], "`layer_types` = []: layer types other than sliding and "
         "full attention, or not one per layer cannot be written yet"),
        ({"model_type": "mixtral"}, "num_local_experts", 0,
         "`num_local_experts` must be a positive whole number, got 0"),
        ({"model_type": "qwen3_next"}, "full_attention_interval", 0,
         "`full_attention_interval` must be a positive whole number, got 0"),
        (LLAMA, "hidden_size", 1.5, "`hidden_size` must be a whole number, got 1.5"),
        (LLAMA, "vocab_size", True, "`vocab_size` must be a number, got true"),
        (LLAMA, "tie_word_embeddings", "false", '`tie_word_embeddings` must be true or false, '
         'got "false"'),
    ],
)  # fmt: skip
def test_a_bad_value_is_refused_at_its_field(base, field, value, message) -> None:
    config = {**base, field: value}
    err = _refusal(config)
    assert err.message == message
    assert (err.filename, err.line, err.column) == ("c.json", _line_of(config, field), 3)
    assert err.source_line is not None and err.source_line.lstrip().startswith(f'"{field}"')


def test_a_nested_field_is_refused_at_its_key() -> None:
    # quantization_config's quant_method (line 3 of this file) as a list: unhashable before
    text = '{\n  "model_type": "llama",\n  "quantization_config": {"quant_method": ["fp8"]}\n}'
    err = _refusal(text)
    assert err.message == '`quantization_config.quant_method` must be a name, got ["fp8"]'
    assert (err.line, err.column) == (3, 27)  # after `  "quantization_config": {`
    ssm = '{\n  "ssm_cfg": {\n    "d_state": "x"\n  },\n  "n_layer": 2, "d_model": 8,\n'
    err = _refusal(ssm + '  "vocab_size": 10}')
    assert err.message == '`ssm_cfg.d_state` must be a number, got "x"'
    assert (err.line, err.column) == (3, 5)


def test_a_missing_field_is_named() -> None:
    # state-spaces' format without n_layer raised KeyError
    err = _refusal({"ssm_cfg": {}, "d_model": 8, "vocab_size": 10})
    assert err.message == "the config lacks `n_layer`, which `layers` needs" and err.line == 0


@pytest.mark.parametrize(
    ("literal", "shown"),
    [("NaN", "NaN"), ("Infinity", "Infinity"), ("-Infinity", "-Infinity"), ("1e400", "1e400")],
)
def test_non_finite_numbers_are_refused_at_the_value(literal: str, shown: str) -> None:
    # were written into the .model as `inf`/`nan` and reported as "unknown name `inf`"
    # at a line of the generated text
    text = f'{{\n  "model_type": "llama",\n  "hidden_size": {literal}\n}}'
    err = _refusal(text)
    assert err.message == f"`hidden_size` is {shown}, not a finite number"
    assert (err.line, err.column) == (3, 18)


def test_deep_nesting_and_huge_integers_are_refused_before_json_reads_them() -> None:
    # 1,000+ levels: RecursionError in json; 4,300+ digits: ValueError from int()
    for depth in (MAX_NESTING + 1, 1_000, 100_000):
        err = _refusal('{"model_type": "llama", "x": ' + "[" * depth + "]" * depth + "}")
        assert err.message == f"the JSON nests more than {MAX_NESTING} levels deep"
        assert (err.line, err.column) == (1, 30 + MAX_NESTING - 1)  # the first bracket too deep
    err = _refusal('{"model_type": "llama",\n "hidden_size": ' + "9" * 5000 + "}")
    assert err.message == (
        f"`hidden_size` is a number of 5,000 characters (the limit is {MAX_NUMBER_CHARS})"
    )
    assert (err.line, err.column) == (2, 17)
    assert len(err.render()) < 300  # the 5,000 digits are not echoed


def test_large_inputs_are_refused_fast_with_a_short_message() -> None:
    # a 50,001-entry layer_types: 66 s and a 1.95 MB message before (quadratic search)
    n = 50_001
    cases = (
        {**GEMMA2, "num_hidden_layers": n, "layer_types": ["sliding_attention"] * (n - 1) + ["x"]},
        # one type per layer but no pattern short enough to write (MAX_PATTERN calls)
        {**GEMMA2, "num_hidden_layers": n,
         "layer_types": ["sliding_attention", "full_attention"] * (n // 2) + ["full_attention"]},
        {**LLAMA, "num_hidden_layers": 10**9},
    )  # fmt: skip
    for config in cases:
        start = time.perf_counter()
        err = _refusal(config)
        assert time.perf_counter() - start < 2.0
        assert len(err.render()) < 400 and err.line > 0
    assert _refusal(cases[1]).message == (
        f"`layer_types`: its 50,001 layers repeat no pattern of at most {MAX_PATTERN:,} "
        "layers (the shortest is 50,001)"
    )


def test_the_layer_bound_admits_its_limit() -> None:
    # MAX_LAYERS layers import (one `repeat` of that count), one more is refused
    text = import_config(json.dumps({**LLAMA, "num_hidden_layers": MAX_LAYERS}), "c.json")
    assert "layers = 100_000" in text
    _refusal({**LLAMA, "num_hidden_layers": MAX_LAYERS + 1})


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from("ab"), min_size=1, max_size=40))
def test_the_period_is_the_shortest_repeating_pattern(types: list[str]) -> None:
    # against the definition (the quadratic search it replaces)
    n = len(types)
    shortest = next(p for p in range(1, n + 1) if all(types[i] == types[i % p] for i in range(n)))
    assert _period(types) == shortest


# ---------------------------------------------------------------- the whole class


def _bases() -> dict[str, dict]:
    """One config per family: the reference copy where there is one, else its defaults
    (a ViT needs its labels; Gemma 3 and Llama 4 the tests' published configs)."""
    bases = {f.stem: json.loads(f.read_text()) for f in sorted(CONFIGS.glob("*.json"))}
    covered = {c.get("model_type") or "mamba_ssm" for c in bases.values()}
    bases |= {t: {"model_type": t} for t in sorted(BY_TYPE) if t not in covered}
    bases |= {"gemma3": GEMMA3_27B, "llama4": LLAMA4_SCOUT,
              "vit": {"model_type": "vit", "id2label": {"0": "a", "1": "b"}}}  # fmt: skip
    return bases


BASES = _bases()
FIELDS = sorted(
    {
        (name, field)
        for name, base in BASES.items()
        for field in {*BY_TYPE[base.get("model_type") or "mamba_ssm"].defaults, *base}
        if field != "model_type"
    }
)
BAD = [0, -1, 1.5, 2**63, 10**9, 10**60, True, "x", None, [], {}, [1], ["silu"], {"a": 1},
       "1" * 2000, list(range(3000))]  # fmt: skip


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.sampled_from(FIELDS), st.sampled_from(BAD))
def test_any_field_with_any_bad_value_is_a_model_or_a_clean_error(case, value) -> None:
    # the class of item 14 (field × value; 7,014 of them ran with no exception but a
    # SpecError when this was written): each imports to a model that compiles or is a
    # SpecError naming a field, briefly, in the config's file, in well under a second
    name, field = case
    config = {**BASES[name], field: value}
    start = time.perf_counter()
    try:
        text = import_config(json.dumps(config, indent=2), "c.json")
    except SpecError as err:
        assert err.filename == "c.json"
        assert "`" in err.message or err.message.startswith("the imported model does not")
        assert len(err.render()) < 700
    else:
        parse_spec(text, "<checked>")
    assert time.perf_counter() - start < 1.0


# ---------------------------------------------------------------- every command


COMMANDS = (
    ("import",),
    ("check",),
    ("params",),
    ("compile", "--hw", "h100"),
    ("serve", "--hw", "h100", "--isl", "128", "--osl", "128"),
    ("sweep", "--hw", "h100"),
    ("diff", "specs/models/llama3-8b.model", "--hw", "h100"),
)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_every_command_given_a_bad_config_exits_2_at_its_field(command, tmp_path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({**LLAMA, "num_key_value_heads": 3}, indent=2))
    line = _line_of({**LLAMA, "num_key_value_heads": 3}, "num_key_value_heads")
    name, *rest = command
    if name == "diff":  # the config as B
        r = run_cli(name, rest[0], str(config), *rest[1:])
    else:
        r = run_cli(name, str(config), *rest)
    assert r.returncode == 2, r.stderr
    assert f"config.json:{line}:3: error: `num_key_value_heads` = 3: kv_heads = 3" in r.stderr
    assert "<imported>" not in r.stderr and "Traceback" not in r.stderr


def test_site_given_a_bad_config_exits_2_and_writes_nothing(tmp_path) -> None:
    config = tmp_path / "config.json"
    config.write_text('{\n  "model_type": "llama",\n  "hidden_size": NaN\n}\n')
    out = tmp_path / "site"
    r = run_cli("site", str(config), "--hw", "h100", "-o", str(out))
    assert r.returncode == 2 and "config.json:3:18: error: `hidden_size` is NaN" in r.stderr
    assert not out.exists() or not any(out.iterdir())


# ---------------------------------------------------------------- titles


@pytest.mark.parametrize(
    ("extra", "title"),
    [
        ({"_name_or_path": "deepseek-ai/DeepSeek-V3"}, "deepseek-ai/DeepSeek-V3"),
        ({"_name_or_path": "/home/me/ckpt/my-llama/"}, "my-llama"),  # a local path: its name
        ({}, "DeepseekV3ForCausalLM from deepseek-v3.json"),  # the reference copy
        ({"architectures": None}, "deepseek_v3 from deepseek-v3.json"),
        # control, bidi and zero-width characters are dropped, quotes kept as text
        ({"_name_or_path": 'a"b\\c\n\u202e\u200bd'}, 'a"b\\c d'),
        ({"_name_or_path": "x" * 500}, "x" * 80),  # importer.MAX_TITLE characters
    ],
)
def test_an_imported_model_has_a_readable_title(extra: dict, title: str) -> None:
    # was "deepseek_v3 (deepseek_v3)": the identifier twice
    config = {**json.loads((CONFIGS / "deepseek-v3.json").read_text()), **extra}
    text = import_config(json.dumps(config, indent=2), "deepseek-v3.json")
    assert parse_spec(text, "<t>").title == title
    assert import_config(json.dumps(config, indent=2), "deepseek-v3.json") == text
