"""Every invalid fixture fails with exactly the error its first line announces.

Each file in fixtures/invalid/ starts with `# error: FILE:LINE:COL: MESSAGE` (FILE relative
to that folder, positions counting the header line itself).
"""

import os
from pathlib import Path

import pytest
from conftest import FIXTURES

from modelcost import SpecError, load_specs, parse_spec

INVALID = sorted((FIXTURES / "invalid").glob("*.model"))


def expected_error(path: Path) -> str:
    header = path.read_text(encoding="utf-8").splitlines()[0]
    assert header.startswith("# error: "), f"{path.name} has no `# error:` header"
    return header.removeprefix("# error: ")


@pytest.mark.parametrize("path", INVALID, ids=[p.stem for p in INVALID])
def test_invalid_fixture(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(path.parent)
    with pytest.raises(SpecError) as info:
        load_specs(path.name)
    err = info.value
    got = f"{os.path.normpath(err.filename)}:{err.line}:{err.column}: {err.message}"
    assert got == expected_error(path)


def test_there_is_a_fixture_per_error_class() -> None:
    # The list: syntax, unknown names, wrong arguments, cycles, dims, divisibility,
    # top_k, dtypes, division by zero, absurd sizes.
    stems = {p.stem for p in INVALID}
    for needed in (
        "syntax_unexpected_token",
        "syntax_unclosed_brace",
        "unknown_name",
        "unknown_argument",
        "wrong_type_bool",
        "import_cycle",
        "extends_cycle",
        "dim_not_positive",
        "dim_not_integer",
        "heads_not_dividing_dim",
        "kv_heads_not_dividing",
        "top_k_above_experts",
        "unknown_dtype",
        "division_by_zero",
        "repeat_too_large",
        "exponent_too_large",
    ):
        assert needed in stems


def test_rendered_error_has_source_caret_and_hint() -> None:
    text = "model a {\n  d_model = 64\n  d_ff = 256\n  mlp(d_f)\n}\n"
    with pytest.raises(SpecError) as info:
        parse_spec(text, filename="m.model")
    err = info.value
    assert (err.filename, err.line, err.column) == ("m.model", 4, 7)
    assert err.message == "unknown name `d_f`"
    assert err.hint == "did you mean `d_ff`?"
    assert err.render() == (
        "m.model:4:7: error: unknown name `d_f`\n"
        "    mlp(d_f)\n"
        "        ^^^\n"
        "  hint: did you mean `d_ff`?"
    )
    assert str(err) == "m.model:4:7: error: unknown name `d_f`"


def test_syntax_error_lists_what_was_expected() -> None:
    with pytest.raises(SpecError) as info:
        parse_spec("model a {\n  d_model = = 3\n}\n")
    assert info.value.hint == "expected `(`, `+`, `-`, a name, a number, a string"


def test_unreadable_file_is_a_spec_error(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as info:
        load_specs(tmp_path / "missing.model")
    assert info.value.message == "cannot read file: No such file or directory"
    bad = tmp_path / "latin1.model"
    bad.write_bytes(b'model a { title = "caf\xe9" }')
    with pytest.raises(SpecError) as info:
        load_specs(bad)
    # 15. a positioned error at the first bad byte: `caf` is 22 characters in
    assert str(info.value) == f"{bad}:1:23: error: invalid UTF-8: byte 0xe9 cannot be decoded"
    assert info.value.render().splitlines()[2] == "  " + " " * 22 + "^"


def test_choosing_among_several_models() -> None:
    text = "model a {\n  d_model = 8\n  rmsnorm\n}\nmodel b extends a {\n  d_model = 16\n}\n"
    with pytest.raises(SpecError) as info:
        parse_spec(text)
    assert info.value.message == "this file defines 2 models; choose one"
    assert parse_spec(text, model="b").params["d_model"] == 16
    with pytest.raises(SpecError) as info:
        parse_spec(text, model="c")
    assert info.value.message == "no model named `c`"


def test_a_nul_byte_in_an_import_path_is_a_positioned_error() -> None:
    # found by the mutation fuzz: os.path raises ValueError on an embedded NUL
    with pytest.raises(SpecError) as info:
        parse_spec('import "a\x00b.model"\nmodel m {\n  d_model = 8\n  rmsnorm\n}\n', "x.model")
    err = info.value
    assert (err.line, err.column, err.message) == (1, 1, "bad import path: embedded null byte")
