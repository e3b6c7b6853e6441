"""Hostile `.model` inputs at or past every bound the README promises, each with the
error it must get (None: it is within bounds and must compile). Used by the fuzz tests
and timed by benchmarks/hostile.py."""

from __future__ import annotations

_LAYERS = "  mla(16, 64, 32, 16, 32, q_lora_rank = 64)\n  moe(64, 4, 128, shared_experts = 2)\n"


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
    "many-statements": (
        "model m { d_model = 8\n" + "  rmsnorm\n" * 1_001 + "}\n",
        "the model expands to more than 1,000 layer statements",
    ),
    "many-ops": (
        "model m { d_model = 256; vocab = 1000\n embed(vocab)\n" + _LAYERS * 498 + "}\n",
        "`m` lowers to more than 1,500 distinct ops",
    ),
    "most-ops": (  # just within every bound: must compile in time
        "model m { d_model = 256; vocab = 1000\n embed(vocab)\n"
        + _LAYERS * 55
        + " rmsnorm\n lm_head(vocab)\n}\n",
        None,
    ),
}
