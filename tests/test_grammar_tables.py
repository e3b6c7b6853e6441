"""The prebuilt parser tables match the grammars (regenerate:
python -m modelcost.language.regen_tables)."""

import marshal

from modelcost.language.grammar_tables import OPTIONS, TABLES_FILE, digest, load_parser


def test_tables_are_current() -> None:
    shipped = marshal.loads(TABLES_FILE.read_bytes())
    for name in OPTIONS:
        assert shipped[name]["sha256"] == digest(name), (
            f"{name} changed: run `python -m modelcost.language.regen_tables`"
        )
    # (the tables themselves differ between builds: lark numbers states in set order)


def test_loaded_parser_parses_like_a_built_one() -> None:
    from lark import Lark

    from modelcost.base.resources import grammar_path

    text = "model m {\n  x = 2 ** 3  # c\n  attention(8, kv_heads = 2)\n}\n"
    built = Lark(grammar_path("modelspec.lark").read_text(), parser="lalr",
                 **OPTIONS["modelspec.lark"])  # fmt: skip
    assert load_parser("modelspec.lark").parse(text) == built.parse(text)
