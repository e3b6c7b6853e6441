"""Precision recipes: the compute precision follows the operands as they reach the
kernel; activation quantization is an op; scales are read; weight-only GEMMs dequantize.
Peaks from specs/hardware (MI355X: fp8 5033.2, fp4 10066.3, bf16 2516.6 matrix TFLOPS,
bf16 vector 157.3 TFLOPS)."""

import pytest
from conftest import MODELS

from modelcost import SpecError, count_params, load_spec, parse_spec
from modelcost.ir.graph import Parallel, Phase, Workload
from modelcost.roofline.compile import compile_report

LLAMA70 = (MODELS / "llama3-70b.model").read_text()


def recipe(name: str, extra: str = ""):
    return parse_spec(LLAMA70 + f"\nmodel q extends llama3_70b {{\n  recipe = {name}\n{extra}}}\n",
                      str(MODELS / "llama3-70b.model"), "q")  # fmt: skip


def op(report, name):
    return next(o for o in report.ops if o.name == name)


def test_an_fp8_w8a8_gemm_runs_at_the_fp8_peak_after_a_quantize_op() -> None:
    r = compile_report(MODELS / "llama3-70b-fp8.model", "mi355x", Workload(Phase.prefill, 1, 2048))
    q = op(r, "layers.0.attn.q_proj")
    assert (q.dtypes["a"], q.dtypes["b"], q.peak_precision) == ("fp8_e4m3", "fp8_e4m3", "fp8")
    assert q.peak_flops == 5033.2e12
    # 2048 × 8192 bf16 activations quantized once and read by q, k and v alike; per-tensor
    # scales: one fp32 for the weights and one for the activations
    quant = op(r, "layers.0.attn.q_proj.quantize")
    assert (quant.kind, quant.shape["elements"]) == ("Quantize", 2048 * 8192)
    assert quant.bytes == 2048 * 8192 * (2 + 1)  # read bf16, write fp8
    assert q.shape["scale_bytes"] == 4 + 4
    assert q.bytes == 2048 * 8192 * 1 + 8192 * 8192 * 1 + 2048 * 8192 * 2 + 8
    kinds = [o.kind for o in r.ops if o.group == "layers.0"]
    assert kinds.count("Quantize") == 4  # attention input, o_proj, MLP input, down_proj
    # the weights: the linear layers' in FP8, embeddings, norms and head in BF16
    c = count_params(load_spec(MODELS / "llama3-70b-fp8.model")).components
    linear = c["attention"] + c["mlp"]
    rest = c["embedding"] + c["head"] + c["norms"]
    assert r.totals.memory.weights == linear * 1 + rest * 2 == 72_656_371_712


def test_per_token_scales_are_written_by_the_quantize_op_and_read_by_the_gemm() -> None:
    r = compile_report(recipe("fp8_dynamic"), "mi355x", Workload(Phase.prefill, 1, 2048))
    quant = op(r, "layers.0.attn.q_proj.quantize")
    # one fp32 scale per token: 2048 of them, each over its 8192 values
    assert (quant.shape["block"], quant.shape["scale_bytes"]) == (8192, 2048 * 4)
    assert quant.bytes == 2048 * 8192 * (2 + 1) + 2048 * 4
    # the GEMM reads them and the weights' per-channel scales (one per output row)
    assert op(r, "layers.0.attn.q_proj").shape["scale_bytes"] == (2048 + 8192) * 4


def test_w4a16_reads_four_bit_weights_and_computes_in_bf16_dequantizing_them() -> None:
    r = compile_report(recipe("w4a16"), "mi355x", Workload(Phase.decode, 1, context=2048))
    q = op(r, "layers.0.attn.q_proj")
    assert (q.dtypes["a"], q.dtypes["b"], q.peak_precision) == ("bf16", "int4", "bf16")
    assert not [o for o in r.ops if o.kind == "Quantize"]  # activations are fed as they are
    # int4 weights and a bf16 scale per 128 along K: 8192 · 64 of them
    assert q.bytes == 8192 * 2 + 8192 * 8192 * 0.5 + 8192 * 2 + 8192 * 64 * 2
    # one multiply per weight element on the vector units outlasts 2·N·K on the matrix
    # cores at M = 1: compute time = 8192² / 157.3 TFLOPS
    assert q.compute_s == 8192 * 8192 / 157.3e12
    assert q.compute_s > 2 * 8192 * 8192 / 2516.6e12


def test_an_mxfp4_a4w4_gemm_reads_one_e8m0_scale_per_32_elements_at_the_fp4_peak() -> None:
    r = compile_report(recipe("mxfp4"), "mi355x", Workload(Phase.prefill, 1, 2048))
    q = op(r, "layers.0.attn.q_proj")
    assert q.peak_precision == "fp4" and q.peak_flops == 10066.3e12
    # 4 bits an element and one 8-bit scale per 32: 0.5 + 1/32 bytes, both operands
    per = 0.5 + 1 / 32
    assert q.bytes == 2048 * 8192 * per + 8192 * 8192 * per + 2048 * 8192 * 2
    quant = op(r, "layers.0.attn.q_proj.quantize")
    assert quant.bytes == 2048 * 8192 * (2 + per)


def test_fp8_attention_reads_an_fp8_cache_at_the_fp8_peak() -> None:
    r = compile_report(recipe("fp8_attention"), "mi355x", Workload(Phase.decode, 8, context=4096))
    sdpa = op(r, "layers.0.attn.sdpa")
    assert (sdpa.dtypes["act"], sdpa.dtypes["kv"], sdpa.peak_precision) == (
        "fp8_e4m3", "fp8_e4m3", "fp8")  # fmt: skip
    # the cache: 8 sequences × 4096 positions × 2 · 8 heads · 128 × 1 byte × 80 layers
    assert r.totals.memory.kv_cache == 8 * 4096 * 2 * 8 * 128 * 80


def test_a_layer_can_take_its_own_recipe_and_a_misspelt_one_is_a_positioned_error() -> None:
    gpt_oss = load_spec(MODELS / "gpt-oss-120b.model")  # MXFP4 experts, BF16 activations
    r = compile_report(gpt_oss, "h100", Workload(Phase.decode, 1, context=2048))
    experts = op(r, "layers.0.moe.experts.gate_up")
    assert (experts.dtypes["x"], experts.dtypes["w"], experts.peak_precision) == (
        "bf16", "mxfp4", "bf16")  # fmt: skip
    assert op(r, "layers.0.attn.q_proj").dtypes["b"] == "bf16"
    with pytest.raises(SpecError) as err:
        recipe("fp8_blok")
    assert err.value.message == "unknown name `fp8_blok`"
    assert err.value.hint == "did you mean `fp8_block`?" and err.value.line > 0
    with pytest.raises(SpecError) as err:
        recipe("bf16")  # a dtype, not a recipe
    assert err.value.message == "`recipe` must be a precision recipe, got `bf16`"
    assert err.value.hint.startswith("recipes: none, fp8, fp8_dynamic, fp8_cs, fp8_ds, mxfp8")
    assert err.value.line > 0


def test_training_casts_read_for_their_amax_or_write_two_copies_as_the_recipe_runs() -> None:
    # one training step of Llama 3 70B on an H100, batch 1 of 2048 tokens; the attention
    # input's cast covers 2048 × 8192 bf16 elements (2 bytes in, 1 out), forward and
    # backward alike (the gradient's cast moves the same bytes back)
    elements = 2048 * 8192
    w = Workload(Phase.train, 1, 2048)

    def cast(name: str):
        quant = op(compile_report(recipe(name), "h100", w), "layers.0.attn.q_proj.quantize")
        assert quant.shape["elements"] == elements
        return quant

    # delayed scaling: the amax history gives the scale, the cast takes the amax as it goes
    # (Transformer Engine DelayedScaling): one pass, 2 + 1 bytes an element
    assert cast("fp8_ds").bytes == elements * (2 + 1)
    # current scaling (Megatron-Bridge FP8-CS): nvte_compute_amax reads the tensor first,
    # then the cast reads and writes it: 2 + 2 + 1 bytes, and a max an element on top of
    # the scale and convert (2 FLOPs)
    cs = cast("fp8_cs")
    assert cs.bytes == elements * (2 + 2 + 1)
    assert cs.flops == elements * (2 + 1)
    # MXFP8 (OCP MX, an E8M0 byte per 32): quantized row-wise and column-wise (its 1×32
    # scales run along K, so the weight gradient's transposed operand needs its own
    # copy): 2 bytes read, two copies of 1 + 1/32 written; each copy 3 FLOPs an element
    # (the block's max, scale, convert)
    mx = cast("mxfp8")
    assert mx.bytes == elements * (2 + 2 * (1 + 1 / 32))
    assert mx.flops == elements * 3 * 2
    # block scaling (Transformer Engine Float8BlockScaling, DeepSeek-V3's 1×128 tiles):
    # an fp32 scale per 128 along K, so row-wise and column-wise copies as MXFP8 makes
    # them, each 1 + 4/128 bytes an element, the tile's amax taken as it goes
    bs = cast("fp8_bs")
    assert bs.bytes == elements * (2 + 2 * (1 + 4 / 128))
    assert bs.flops == elements * 3 * 2
    # the inference recipe of the same granularity casts once
    assert cast("fp8_block").bytes == elements * (2 + 1 + 4 / 128)
    # inference under the same recipes casts once, as the engines do
    infer = compile_report(recipe("fp8_cs"), "h100", Workload(Phase.prefill, 1, 2048))
    assert op(infer, "layers.0.attn.q_proj.quantize").bytes == elements * (2 + 1)


def test_the_backward_casts_each_gemms_output_gradient_as_transformer_engine_does() -> None:
    # Llama 3 70B, one 8192-token sequence, tp 4 with sequence parallelism, FP8-CS.
    # Transformer Engine's backward quantizes each FP8 GEMM's output gradient (its
    # grad_output quantizer, for dgrad and wgrad); the input gradient leaves the dgrad
    # GEMM in bf16. Per rank: q 8192 × 2048, k and v 8192 × 256 (8 KV heads of 128 over
    # 4 ranks); gate and up 8192 × 7168 each (28,672 / 4). The row-parallel o_proj and
    # down_proj cast their gradient's 1/tp shard (2048 × 8192) before gathering it in
    # FP8. Current scaling reads each gradient twice (amax, then cast) and writes FP8
    par = Parallel(tp=4, sp=True)
    r = compile_report(recipe("fp8_cs"), "h100", Workload(Phase.train, 1, 8192, parallel=par))
    grads = {
        "layers.0.attn.quantize": 8192 * (2048 + 256 + 256),
        "layers.0.attn.o_proj.quantize": 2048 * 8192,
        "layers.0.mlp.quantize": 8192 * 2 * 7168,
        "layers.0.mlp.down_proj.quantize": 2048 * 8192,
    }
    for name, n in grads.items():
        cast = op(r, name)
        assert cast.shape["grads"] == n, name
        assert cast.backward is not None
        assert cast.backward.bytes == n * (2 + 2 + 1), name
        assert cast.backward.flops == n * (2 + 1), name
