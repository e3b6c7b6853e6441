"""The parser: literals, positions, comments, and the AST it builds."""

import pytest

from modelcost.language import syntax as s
from modelcost.language.parse import number_value, parse


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("8192", 8192),
        ("128_256", 128256),
        ("4K", 4000),  # K = 10**3
        ("4Ki", 4096),  # Ki = 2**10
        ("128Ki", 131072),
        ("1M", 1_000_000),
        ("2Mi", 2 * 2**20),
        ("1G", 10**9),
        ("1Gi", 2**30),
        ("1T", 10**12),
        ("1Ti", 2**40),
        ("1.5K", 1500),  # integral after scaling: an int
        ("0.5", 0.5),
        ("1e-5", 1e-5),
        ("5e5", 500000.0),
    ],
)
def test_number_literals(text: str, value: int | float) -> None:
    got = number_value(text)
    assert got == value
    assert type(got) is type(value)


def test_ast_and_positions() -> None:
    m = parse("model a extends b {\n  x = 1 + 2 * 3\n  attention(8, kv_heads = 2)\n}\n")
    (model,) = m.items
    assert isinstance(model, s.ModelDef)
    assert (model.name, model.extends) == ("a", "b")
    assign, call = model.body
    assert assign == s.Assign(
        "x",
        s.BinOp("+", s.Number("1", 1), s.BinOp("*", s.Number("2", 2), s.Number("3", 3))),
    )
    assert (assign.pos.line, assign.pos.column) == (2, 3)
    assert call == s.OpCall(
        "attention", (s.Arg(None, s.Number("8", 8)), s.Arg("kv_heads", s.Number("2", 2))), True
    )
    assert (call.args[1].pos.line, call.args[1].pos.column) == (3, 16)
    assert (model.extends_pos.line, model.extends_pos.column) == (1, 17)


def test_power_is_right_associative_and_binds_tighter_than_unary_minus() -> None:
    (model,) = parse("model a { x = -2 ** 3 ** 2 }").items
    (assign,) = model.body
    two, three = s.Number("2", 2), s.Number("3", 3)
    assert assign.value == s.Unary("-", s.BinOp("**", two, s.BinOp("**", three, s.Number("2", 2))))


def test_semicolons_and_newlines_are_interchangeable() -> None:
    a = parse("model a { x = 1; rmsnorm; residual }")
    b = parse("model a {\n  x = 1\n  rmsnorm\n  residual\n}")
    assert a.items == b.items


def test_comments_are_collected_with_their_kind() -> None:
    m = parse('# head\nmodel a {  # open\n  x = "#not a comment"\n}\n')
    assert [(c.text, c.line, c.trailing) for c in m.comments] == [
        ("# head", 1, False),
        ("# open", 2, True),
    ]
    (model,) = m.items
    assert model.body[0].value == s.String("#not a comment")


def test_string_escapes() -> None:
    (model,) = parse(r'model a { t = "a \"b\" \\ c" }').items
    assert model.body[0].value.value == 'a "b" \\ c'


def test_block_with_params_and_imports() -> None:
    m = parse('import "x.model"\nblock l(a, b = 2) { mlp(a) }\n')
    imp, block = m.items
    assert imp == s.Import("x.model")
    assert block.params == (s.Param("a", None), s.Param("b", s.Number("2", 2)))
