"""Gluon kernel selection: by arch, dtype and shape, with the reason when nothing fits."""

from modelcost.base.dtypes import DType
from modelcost.estimate.kernels import catalog, serve
from modelcost.perfmodel import GemmOp, GroupedGemmOp

bf16, e4m3, e5m2, mxfp4 = DType.bf16, DType.fp8_e4m3, DType.fp8_e5m2, DType.mxfp4


def test_catalog_entries_link_to_github_files() -> None:
    ids = [k.id for k in catalog()]
    assert len(ids) == len(set(ids)) == 16
    for k in catalog():
        assert k.url.startswith("https://github.com/") and k.url.endswith(".py")
        assert "/blob/main/" in k.url and k.path in k.url and k.path in k.url_pinned


def test_compute_shaped_bf16_on_gfx950_gets_the_256_tile_kernel() -> None:
    c = serve(GemmOp(2048, 8192, 8192), "gfx950")
    assert (c.id, c.exact, c.tflops) == ("gfx950-intra-a16w16-v9", True, 1587)
    assert c.measured == "M=N=4096, K=8192, fp16"
    assert c.reason == "compute-shaped, tile-aligned for 256×256×64"


def test_decode_shaped_gemm_gets_the_memory_bound_kernel() -> None:
    c = serve(GemmOp(8, 8192, 8192), "gfx950")
    assert c.id == "gfx950-memory-bound-gemm"
    assert c.reason == (
        "M=8 is below the 256-row tile: served by the memory-bound kernel; N/256 = 32 "
        "workgroups fill 32 of 256 CUs: split-K would be needed to reach full bandwidth"
    )


def test_unaligned_shapes_say_what_padding_they_need() -> None:
    c = serve(GemmOp(2048, 2880, 4096), "gfx950")
    assert (c.id, c.exact) == ("gfx950-intra-a16w16-v9", False)
    assert c.reason == "N=2880 is not a multiple of 256 (padding to 3072)"


def test_by_dtype() -> None:
    assert serve(GemmOp(4096, 4096, 16384, a=e5m2, b=e5m2), "gfx950").id == "gfx950-intra-a8w8"
    # e4m3 is not the tutorial's format: AITER's masked a8w8 serves it
    assert serve(GemmOp(4096, 4096, 16384, a=e4m3, b=e4m3), "gfx950").id == (
        "aiter-gfx950-gemm-a8w8"
    )
    c = serve(GemmOp(4096, 4096, 32768, a=mxfp4, b=mxfp4), "gfx950")
    assert (c.id, c.tflops, c.exact) == ("gfx950-intra-a4w4-v1", 5843, True)


def test_mixed_dtypes_are_served_after_quantizing_the_activations() -> None:
    c = serve(GemmOp(8, 7168, 2048, a=bf16, b=e4m3), "gfx950")
    # DeepSeek-V3's shared-expert down projection: a fixed-shape FP8 decode kernel
    assert c.id == "aiter-gfx950-n7168_k2048_m32"
    assert not c.exact
    assert c.reason.startswith("bf16 activations quantized to fp8_e4m3 (no mixed-dtype kernel)")


def test_grouped_gemm_is_served_per_expert() -> None:
    c = serve(GroupedGemmOp(M=8192, K=2880, N=5760, G=128, w=mxfp4), "gfx950")
    assert c.id == "aiter-gfx950-gemm-afp4wfp4"
    assert c.reason.startswith("grouped GEMM (~64 rows per expert, no grouped Gluon kernel)")


def test_other_architectures() -> None:
    assert serve(GemmOp(4096, 4096, 4096), "gfx942").id == "gfx942-inter_wave-a16w16"
    none = serve(GemmOp(4096, 4096, 4096, a=e4m3, b=e4m3), "gfx942")
    assert none.id is None and none.reason == "no Gluon kernel for fp8_e4m3 on gfx942"
    hopper = serve(GemmOp(2000, 4096, 4096), "sm90")
    assert hopper.id == "triton-tut-07-persistence"
    assert hopper.reason == "compute-shaped, TMA bounds handle any M, N, K"
    assert serve(GemmOp(4096, 4096, 4096), "sm100").id == "triton-tut-08-warp-specialization"
    scaled = serve(GemmOp(4096, 4096, 4096, a=mxfp4, b=mxfp4), "sm100")
    assert scaled.id == "triton-tut-11-tcgen05-mma-scaled"
    ampere = serve(GemmOp(4096, 4096, 4096), "sm80")
    assert ampere.id is None and ampere.reason.startswith("Gluon has no GEMM kernel for sm80")


def test_the_split_k_note_counts_the_parts_own_compute_units() -> None:
    # MI355X has 256 CUs, MI350X too; a part with 304 says so (hardware file's compute_units)
    c = serve(GemmOp(8, 8192, 8192), "gfx950", compute_units=304)
    assert c.reason.endswith("N/256 = 32 workgroups fill 32 of 304 CUs: split-K would be "
                             "needed to reach full bandwidth")  # fmt: skip
