"""The resolver: what each construct of the language means in the Spec IR."""

from pathlib import Path

import pytest
from conftest import FIXTURES, ZOO

from modelcost import load_spec, parse_spec
from modelcost.base.dtypes import DType
from modelcost.language import spec as ir
from modelcost.language.spec import walk


def ops(spec: ir.Spec) -> list[tuple[ir.Op, int]]:
    return list(walk(spec.body))


def only(spec: ir.Spec, kind: type) -> list[ir.Op]:
    return [op for op, _ in ops(spec) if isinstance(op, kind)]


def test_imports_extends_and_late_binding() -> None:
    spec = load_spec(FIXTURES / "valid" / "child.model")
    # child overrides d_model, kv_heads and layers; base's expressions see the overrides
    assert spec.name == "child"
    assert spec.params == {"d_model": 512, "heads": 4, "kv_heads": 1, "ratio": 4, "layers": 3}
    (repeat,) = [n for n in spec.body if isinstance(n, ir.Repeat)]
    assert repeat.count == 3
    (attn,) = only(spec, ir.Attention)
    assert (attn.dim, attn.heads, attn.kv_heads, attn.head_dim) == (512, 4, 1, 128)  # MQA
    (mlp,) = only(spec, ir.MLP)
    assert mlp.d_ff == 4 * 512  # block default `width = d_model` is late-bound too


def test_block_arguments_defaults_and_locals() -> None:
    spec = parse_spec(
        """
        block layer(window, scale = 2) {
          inner = scale * d_model
          attention(8, window = window)
          mlp(inner)
        }
        model m {
          d_model = 64
          layer(16)
          layer(window = 0, scale = 3)
        }
        """
    )
    a1, a2 = only(spec, ir.Attention)
    m1, m2 = only(spec, ir.MLP)
    assert (a1.window, a2.window) == (16, 0)
    assert (m1.d_ff, m2.d_ff) == (128, 192)
    assert [n.name for n in spec.body] == ["layer", "layer"]


def test_heterogeneous_stacks_keep_their_groups() -> None:
    spec = parse_spec(
        """
        model m {
          d_model = 64
          layers = 10
          dense = 3
          repeat dense { mlp(256) }
          repeat layers - dense { moe(experts = 4, top_k = 2, d_ff = 64) }
          repeat 0 { rmsnorm }
        }
        """
    )
    r1, r2 = spec.body  # `repeat 0` vanishes
    assert (r1.count, r2.count) == (3, 7)
    assert isinstance(r1.body[0], ir.MLP) and isinstance(r2.body[0], ir.MoE)


def test_expressions() -> None:
    spec = parse_spec(
        """
        model m {
          d_model = 8192
          a = d_model / 64          # exact: an int
          b = 7 / 2                 # inexact: a float
          c = 7 // 2
          d = 7 % 4
          e = 2 ** 10
          f = -(3 - 5) * 2
          g = min(3, 1, 2) + max(4, 5)
          h = ceil(50_277 / 16) * 16
          i = floor(2.7)
          j = 4Ki + 4K
          k = "text"
          l = true
          rmsnorm
        }
        """
    )
    p = spec.params
    assert (p["a"], p["b"], p["c"], p["d"], p["e"], p["f"]) == (128, 3.5, 3, 3, 1024, 4)
    assert type(p["a"]) is int
    assert (p["g"], p["h"], p["i"], p["j"], p["k"], p["l"]) == (6, 50288, 2, 8096, "text", True)


def test_dtype_roles_defaults_and_overrides() -> None:
    spec = parse_spec(
        """
        block quant {
          dtype = fp8
          mlp(64)
        }
        model m {
          d_model = 64
          dtype = bf16
          kv_dtype = fp8_e5m2
          attention(4)
          attention(4, kv_dtype = int8)
          mlp(64, weight_dtype = mxfp4)
          mlp(64, dtype = fp16)
          quant
        }
        """
    )
    assert spec.dtypes == ir.DtypePolicy(
        weights=DType.bf16, activations=DType.bf16, kv_cache=DType.fp8_e5m2
    )
    a1, a2 = only(spec, ir.Attention)
    assert a1.dtypes.kv_cache is DType.fp8_e5m2
    assert a2.dtypes.kv_cache is DType.int8
    m1, m2, m3 = only(spec, ir.MLP)
    assert (m1.dtypes.weights, m1.dtypes.activations) == (DType.mxfp4, DType.bf16)
    assert (m2.dtypes.weights, m2.dtypes.activations) == (DType.fp16, DType.fp16)
    # a block-local `dtype` beats the model's; `fp8` is e4m3
    assert m3.dtypes == ir.DtypePolicy(
        weights=DType.fp8_e4m3, activations=DType.fp8_e4m3, kv_cache=DType.fp8_e4m3
    )


def test_default_dtype_is_bf16() -> None:
    spec = parse_spec("model m { d_model = 8; rmsnorm }")
    assert spec.dtypes == ir.DtypePolicy(
        weights=DType.bf16, activations=DType.bf16, kv_cache=DType.bf16
    )


def test_attention_variants() -> None:
    spec = parse_spec(
        """
        model m {
          d_model = 1024
          attention(16)                                   # MHA, head_dim = 64
          attention(16, 1)                                # MQA
          attention(16, 4, 128, qkv_bias = true, qk_norm = true, window = 4Ki,
                    softcap = 50.0, sinks = true, rope = false, causal = false)
          mla(16, kv_lora_rank = 512, qk_nope_head_dim = 128, qk_rope_head_dim = 64,
              v_head_dim = 128, q_lora_rank = 1536)
        }
        """
    )
    mha, mqa, full = only(spec, ir.Attention)
    assert (mha.kv_heads, mha.head_dim) == (16, 64)
    assert (mqa.kv_heads, mqa.head_dim) == (1, 64)
    assert full.model_dump(exclude={"dtypes"}) == {
        "kind": "attention",
        "dim": 1024,
        "heads": 16,
        "kv_heads": 4,
        "head_dim": 128,
        "qkv_bias": True,
        "k_bias": True,  # follows qkv_bias unless set
        "out_bias": False,
        "fused_qkv": False,
        "qk_norm": True,
        "rope": False,
        "window": 4096,
        "softcap": 50.0,
        "sinks": True,
        "chunk": 0,
        "qk_l2_norm": False,
        "gate": False,
        "causal": False,
        "kernel": ir.AttentionKernel.flash,  # a flash kernel unless `kernel = math`
    }
    (mla,) = only(spec, ir.MLA)
    assert (mla.q_lora_rank, mla.kv_lora_rank, mla.v_head_dim) == (1536, 512, 128)


def test_other_layers() -> None:
    spec = parse_spec(
        """
        model m {
          d_model = 768
          patch_embed(16, 224)
          pos_embed(197)
          layernorm
          layernorm(bias = false)
          mlp(3072, act = gelu, bias = true)
          moe(8, 2, 1024, shared_experts = 2, shared_d_ff = 512, router_bias = true)
          mamba2(d_state = 64)
          residual
          classifier(1000)
        }
        """
    )
    kinds = [op.kind for op, _ in ops(spec)]
    assert kinds == [
        "patch_embed", "pos_embed", "layernorm", "layernorm", "mlp", "moe", "mamba2",
        "residual", "classifier",
    ]  # fmt: skip
    (mamba,) = only(spec, ir.Mamba2)
    assert (mamba.d_inner, mamba.heads, mamba.chunk) == (1536, 24, 256)
    (moe,) = only(spec, ir.MoE)
    assert (moe.shared_experts, moe.shared_d_ff, moe.act) == (2, 512, ir.Activation.swiglu)


def test_spec_is_frozen_and_strict() -> None:
    spec = parse_spec("model m { d_model = 8; rmsnorm }")
    with pytest.raises(ValueError):
        spec.title = "x"  # type: ignore[misc]
    with pytest.raises(ValueError):
        ir.Norm(kind="rmsnorm", dim=8, dtypes=spec.dtypes, extra_field=1)  # type: ignore[call-arg]
    again = ir.Spec.model_validate_json(spec.model_dump_json())
    assert again == spec


@pytest.mark.parametrize("path", ZOO, ids=[p.stem for p in ZOO])
def test_resolved_specs_are_what_validation_would_make(path: Path) -> None:
    # the resolver builds the IR without validation (Frozen.trusted): validating it
    # again changes nothing, not even an int where the schema says float
    spec = load_spec(path)
    text = spec.model_dump_json()
    assert ir.Spec.model_validate_json(text).model_dump_json() == text
    assert ir.Spec.model_validate(spec.model_dump()) == spec


def test_json_schema_describes_the_spec() -> None:
    schema = ir.Spec.model_json_schema()
    assert schema["title"] == "Spec"
    assert {"name", "title", "params", "dtypes", "body"} <= set(schema["properties"])
    assert "Attention" in schema["$defs"] and "MoE" in schema["$defs"]
