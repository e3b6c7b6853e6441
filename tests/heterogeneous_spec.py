"""The scale input of issue 22 (item 5): a `.model` spec whose layers all differ. Used by
tests/test_heterogeneous.py (its exact parameters and op count) and timed by
benchmarks/bench.py (as tests/hostile.py's inputs are by benchmarks/hostile.py)."""

from __future__ import annotations


def distinct_layers(n: int) -> str:
    """n layers, each a block call with its own FFN width (4096 + i) and head size
    (128 + i % 2): 16 distinct ops a layer, plus the embedding, final norm and head."""
    return (
        "block layer(ff, hd) {\n rmsnorm\n attention(32, 8, head_dim = hd)\n residual\n"
        " rmsnorm\n mlp(ff)\n residual\n}\nmodel m { d_model = 4096; vocab = 32000\n"
        " embed(vocab)\n"
        + "".join(f" layer({4096 + i}, {128 + i % 2})\n" for i in range(n))
        + " rmsnorm\n lm_head(vocab)\n}\n"
    )
