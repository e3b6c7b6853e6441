"""Hostile `.model` inputs at or past every bound the README promises, each with the
error it must get (None: it is within bounds and must compile). Used by the fuzz tests
and timed by benchmarks/hostile.py."""

from __future__ import annotations

_LAYERS = "  mla(16, 64, 32, 16, 32, q_lora_rank = 64)\n  moe(64, 4, 128, shared_experts = 2)\n"
_PAIR = "block pair {\n" + _LAYERS + "}\n"


def _chain(n: int) -> str:
    lines = ["model m {", "  a0 = 8"] + [f"  a{i} = a{i - 1} + 1" for i in range(1, n)]
    return "\n".join([*lines, f"  d_model = a{n - 1}", "  rmsnorm", "}"]) + "\n"


HOSTILE: dict[str, tuple[str, str | None]] = {
    # 470 k nested parentheses: 15 s in lark before the bounds
    "parens": (
        "model m { d_model = " + "(" * 470_000 + "8" + ")" * 470_000 + "\n rmsnorm }\n",
        "the file has too many tokens (940,008; the limit is 20,000)",
    ),
    "parens-deep": (
        "model m { d_model = " + "(" * 100 + "8" + ")" * 100 + "\n rmsnorm }\n",
        "brackets are nested more than 64 levels deep",
    ),
    # a parameter chain as long as the token bound allows: positioned, and fast
    "param-chain": (_chain(3_500), "parameters depend on each other too deeply"),
    "pow-chain": (
        "model m { d_model = " + "**".join(["1"] * 300_000) + "\n rmsnorm }\n",
        "the file has too many tokens (600,006; the limit is 20,000)",
    ),
    "pow-chain-short": (
        "model m { d_model = " + "**".join(["1"] * 1_000) + "\n rmsnorm }\n",
        "expression is too long (more than 256 operators in a row)",
    ),
    "plus-chain": (
        "model m { d_model = " + "+".join(["1"] * 5_000) + "\n rmsnorm }\n",
        "expression is too long (more than 256 operators in a row)",
    ),
    "unary-chain": (
        "model m { d_model = " + "-" * 2_000 + "8\n rmsnorm }\n",
        "expression is too long (more than 256 operators in a row)",
    ),
    "nested-repeat": (
        "model m { d_model = 8\n" + "repeat 1 {" * 85_000 + "rmsnorm" + "}" * 85_000 + "\n}\n",
        "the file has too many tokens (340,008; the limit is 20,000)",
    ),
    "long-number": (
        "model m { d_model = " + "9" * 900_000 + "\n rmsnorm }\n",
        "number literal is too long (900,000 characters; the limit is 64)",
    ),
    # 1,001 calls of a block of 20 statements: 20,020 statements in ~3,000 tokens
    "many-statements": (
        "block b {\n" + "  rmsnorm\n" * 20 + "}\nmodel m { d_model = 8\n" + "  b\n" * 1_001 + "}\n",
        "the model expands to more than 20,000 layer statements",
    ),
    # each call of `pair` lowers to 25 distinct ops (decode): 1,300 calls are 32,500
    "many-ops": (
        _PAIR
        + "model m { d_model = 256; vocab = 1000\n embed(vocab)\n"
        + "  pair\n" * 1_300
        + "}\n",
        "`m` lowers to more than 30,000 distinct ops",
    ),
    "most-ops": (  # just within every bound (29,753 ops in decode): must compile in time
        _PAIR
        + "model m { d_model = 256; vocab = 1000\n embed(vocab)\n"
        + "  pair\n" * 1_190
        + " rmsnorm\n lm_head(vocab)\n}\n",
        None,
    ),
}
