"""Widths agree from layer to layer; `linear(out)` changes the stream's width."""

import pytest

from modelcost import SpecError, count_params, parse_spec
from modelcost.ir.graph import Phase, Workload
from modelcost.lowering.lower import lower

PROJECTOR = """
model m {
  d_model = 1024
  patch_embed(14, 336)
  repeat 2 {
    layernorm
    attention(16, rope = false, causal = false)
    residual
  }
  linear(4096)
  repeat 2 {
    rmsnorm
    attention(32)
    residual
  }
  lm_head(32000)
}
"""


def test_a_projector_changes_the_width_the_next_layers_read() -> None:
    # after linear(4096) every layer is 4096 wide unless it says otherwise
    spec = parse_spec(PROJECTOR)
    g = lower(spec, Workload(Phase.prefill, 1))
    proj = next(n.op for n in g.nodes if n.name == "linear")
    # 577 tokens ((336/14)² patches + a class token) from 1024 to 4096 features
    assert (proj.M, proj.N, proj.K, proj.bias) == (577, 4096, 1024, True)
    q = next(n.op for n in g.nodes if n.name.endswith("attn.q_proj") and n.op.K == 4096)
    assert q.M == 577
    c = count_params(spec).components
    assert c["mlp"] == 1024 * 4096 + 4096  # the projector's weight and bias


def test_a_layer_wider_than_the_stream_is_a_positioned_error() -> None:
    # a 4096-wide norm on a 1024-wide stream (the mistake the check exists for)
    bad = PROJECTOR.replace("  linear(4096)\n", "").replace("rmsnorm", "rmsnorm(dim = 4096)")
    with pytest.raises(SpecError) as err:
        parse_spec(bad)
    assert err.value.message == "`rmsnorm` is 4096 wide, but the stream is 1024 wide here"
    assert err.value.line == 11 and err.value.hint.startswith("pass dim = 1024")


def test_a_width_change_inside_a_repeat_is_refused() -> None:
    bad = """
    model m {
      d_model = 64
      embed(100)
      repeat 2 {
        linear(128)
      }
    }
    """
    with pytest.raises(SpecError, match="must end as wide as it starts: 64 in, 128 out"):
        parse_spec(bad)
