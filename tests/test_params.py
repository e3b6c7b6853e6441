"""Exact parameter counts of the zoo, derived by hand from each model's config.json.

Every count includes every weight, bias and norm scale of the reference implementation
(Hugging Face transformers, or mamba_ssm for Mamba-2). The published totals quoted in
the issue are for orientation; the derivations below are what is asserted.
"""

import pytest
from conftest import MODELS

from modelcost import count_params, load_spec
from modelcost.lowering.params import Component


def counts(name: str):
    return count_params(load_spec(MODELS / name))


def test_llama3_8b() -> None:
    # vocab V=128256, d=4096, L=32, H=32, KV=8, hd=128, ff=14336, untied.
    # attn = d*H*hd + 2*d*KV*hd + H*hd*d = 16,777,216 + 8,388,608 + 16,777,216 = 41,943,040
    # mlp = 3*d*ff = 176,160,768; norms 2*d = 8,192; per layer 218,112,000
    # total = 32*218,112,000 + 2*V*d (embed + head) + d (final norm)
    #       = 6,979,584,000 + 1,050,673,152 + 4,096 = 8,030,261,248   (published 8.03 B)
    c = counts("llama3-8b.model")
    assert (c.total, c.active) == (8_030_261_248, 8_030_261_248)


def test_llama3_70b() -> None:
    # d=8192, L=80, H=64, KV=8, hd=128, ff=28672, V=128256.
    # attn = 67,108,864 + 2*8,388,608 + 67,108,864 = 150,994,944; mlp = 704,643,072
    # per layer = 150,994,944 + 704,643,072 + 16,384 = 855,654,400
    # total = 80*855,654,400 + 2*1,050,673,152 + 8,192 = 70,553,706,496   (published 70.55 B)
    c = counts("llama3-70b.model")
    assert c.total == 70_553_706_496
    assert c.components == {
        Component.embedding: 1_050_673_152,
        Component.attention: 80 * 150_994_944,
        Component.mlp: 80 * 704_643_072,
        Component.norms: 80 * 16_384 + 8_192,
        Component.head: 1_050_673_152,
    }


def test_llama3_1_nemotron_51b() -> None:
    # 80 NAS layers (specs/models/llama3.1-nemotron-51b.model), d=8192, 64 heads of 128,
    # V=128256: 54 with attention (q, o 2·8192² = 134,217,728, k, v 2·8192·128·kv =
    # 2,097,152·kv; kv 8 ×44, 4 ×1, 2 ×6, 1 ×3: Σkv = 371), 18 with a d×d linear in its
    # place (67,108,864, counted as an MLP-side linear), 8 with none; FFN widths 28,672
    # ×44, 14,336 ×16, 7,168 ×20 at 3·8192·d_ff each. Norms: two a layer with a mixer,
    # one without, and the final one: (72·2 + 8 + 1)·8192.
    attention = 54 * 134_217_728 + 371 * 2_097_152  # = 8,025,800,704
    mlp = 3 * 8192 * (44 * 28_672 + 16 * 14_336 + 20 * 7_168) + 18 * 67_108_864
    norms = (72 * 2 + 8 + 1) * 8192  # = 1,253,376
    c = counts("llama3.1-nemotron-51b.model")
    assert c.components == {
        Component.embedding: 1_050_673_152,
        Component.attention: attention,
        Component.mlp: mlp,
        Component.norms: norms,
        Component.head: 1_050_673_152,
    }
    # the model card's 51.5 B; the same count as `modelcost import` of the block table
    # (tests/test_heterogeneous.py)
    assert c.total == 51_501_015_040


def test_llama3_1_405b() -> None:
    # d=16384, L=126, H=128, KV=8, hd=128, ff=53248, V=128256.
    # attn = 2*268,435,456 + 2*16,777,216 = 570,425,344; mlp = 3*16384*53248 = 2,617,245,696
    # per layer = 570,425,344 + 2,617,245,696 + 32,768 = 3,187,703,808
    # total = 126*3,187,703,808 + 2*2,101,346,304 + 16,384 = 405,853,388,800  (405.85 B)
    assert counts("llama3.1-405b.model").total == 405_853_388_800


def test_mixtral_8x7b() -> None:
    # d=4096, L=32, H=32, KV=8, ff=14336, E=8, k=2, V=32000, untied.
    # expert = 3*4096*14336 = 176,160,768; router = 4096*8 = 32,768; attn = 41,943,040
    # per layer total = 41,943,040 + 8*176,160,768 + 32,768 + 8,192 = 1,451,270,144
    # total = 32*1,451,270,144 + 2*131,072,000 + 4,096 = 46,702,792,704    (46.70 B)
    # per layer active = 41,943,040 + 2*176,160,768 + 32,768 + 8,192 = 394,305,536
    # active = 32*394,305,536 + 262,144,000 + 4,096 = 12,879,925,248        (12.9 B)
    c = counts("mixtral-8x7b.model")
    assert (c.total, c.active) == (46_702_792_704, 12_879_925_248)


def test_deepseek_v3() -> None:
    # d=7168, L=61 (3 dense + 58 MoE), H=128, V=129280, untied; the MTP module apart.
    # MLA: q_a 7168*1536 = 11,010,048; q_a_norm 1536; q_b 1536*128*192 = 37,748,736;
    #      kv_a 7168*(512+64) = 4,128,768; kv_a_norm 512; kv_b 512*128*256 = 16,777,216;
    #      o 128*128*7168 = 117,440,512; sum 187,107,328
    # dense MLP 3*7168*18432 = 396,361,728; expert 3*7168*2048 = 44,040,192
    # router 256*7168 + 256 (e_score_correction_bias: a buffer in the reference code,
    #   counted as a checkpoint tensor, docs/conventions.md) = 1,835,264
    # dense layer = 187,107,328 + 396,361,728 + 2*7168 = 583,483,392
    # MoE layer = 187,107,328 + 257*44,040,192 + 1,835,264 + 14,336 = 11,507,286,272
    # total = 3*583,483,392 + 58*11,507,286,272 + 2*926,679,040 + 7,168 = 671,026,419,200
    # active MoE layer = 187,107,328 + 9*44,040,192 + 1,835,264 + 14,336 = 585,318,656
    # active = 3*583,483,392 + 58*585,318,656 + 1,853,358,080 + 7,168 = 37,552,297,472
    c = counts("deepseek-v3.model")
    assert (c.total, c.active) == (671_026_419_200, 37_552_297_472)
    # the multi-token-prediction module (the checkpoint's layer 61): its own embedding
    # and head copies 2*926,679,040, enorm and hnorm 2*7168, eh_proj 14336*7168 =
    # 102,760,448, one MoE layer 11,507,286,272 and its norm 7168 = 13,463,426,304.
    # The technical report: "685B ... 671B of the Main Model weights and 14B of the
    # MTP Module weights"; by this count 671.03 B + 13.46 B = 684.49 B, which the
    # report's round figures bound from above
    mtp = 2 * 926_679_040 + 2 * 7168 + 14336 * 7168 + 11_507_286_272 + 7168
    assert c.apart == {"mtp": mtp} and mtp == 13_463_426_304
    assert 684e9 < c.total + mtp < 685e9 and 13e9 < mtp < 14e9


def test_t5_base() -> None:
    # d=768, 12 encoder + 12 decoder layers, 12 heads of 64, ff=3072 (relu), V=32128;
    # one shared embedding table (the LM head tied to it); no biases; T5's norms scale
    # only. Each stack's first layer has a 32 x 12 relative position bias table.
    # encoder layer = 4*768*768 + 2*768*3072 + 2*768 = 7,079,424
    # decoder layer = 8*768*768 (self and cross) + 2*768*3072 + 3*768 = 9,439,488
    # total = 32128*768 + 12*7,079,424 + 12*9,439,488 + 2*(32*12) + 2*768 = 222,903,552,
    # the count transformers reports for T5ForConditionalGeneration (t5-base, "223M")
    c = counts("t5-base.model")
    assert c.total == 32128 * 768 + 12 * 7_079_424 + 12 * 9_439_488 + 2 * 384 + 2 * 768
    assert c.total == 222_903_552
    assert c.streams == {"encoder": 32128 * 768 + 12 * 7_079_424 + 384 + 768}


def test_whisper_large_v3() -> None:
    # d=1280, 32 + 32 layers, 20 heads, ff=5120 (gelu), 128 mel bins, V=51866, tied.
    # conv_stem = (128*3*1280 + 1280) + (1280*3*1280 + 1280) = 5,409,280
    # attention = 4*1280*1280 + 3*1280 (q, v, out biases; k_proj has none) = 6,557,440
    # mlp = 2*1280*5120 + 5120 + 1280 = 13,113,600; a LayerNorm 2*1280
    # encoder = 5,409,280 + 1500*1280 + 32*(6,557,440 + 13,113,600 + 2*2560) + 2560
    #         = 636,968,960
    # decoder = 51866*1280 + 448*1280 + 32*(2*6,557,440 + 13,113,600 + 3*2560) + 2560
    #         = 906,521,600
    # total = 1,543,490,560 ("1550M" in the model card's table)
    c = counts("whisper-large-v3.model")
    encoder = 5_409_280 + 1500 * 1280 + 32 * (6_557_440 + 13_113_600 + 2 * 2560) + 2560
    decoder = 51866 * 1280 + 448 * 1280 + 32 * (2 * 6_557_440 + 13_113_600 + 3 * 2560) + 2560
    assert c.streams == {"encoder": encoder} and encoder == 636_968_960
    assert c.total == encoder + decoder == 1_543_490_560


def test_llava_1_5_7b() -> None:
    # Language model (Vicuna 7B, Llama 2 layers): d=4096, L=32, ff=11008, V=32064, untied
    # = 2*32064*4096 + 32*(4*4096² + 3*4096*11008 + 2*4096) + 4096 = 6,738,939,904
    # CLIP ViT-L/14 at 336 px: patch conv 3*14*14*1024 (no bias) + class token 1024 +
    # 577*1024 positions + pre-LayerNorm 2048 = 1,196,032; a layer = 4*(1024² + 1024) +
    # (1024*4096 + 4096) + (4096*1024 + 1024) + 2*2048 = 12,596,224
    # projector = (1024*4096 + 4096) + (4096*4096 + 4096) = 20,979,712
    # The projector reads the 23rd layer's output (vision_feature_layer -2): the spec
    # holds 23 layers, 1,196,032 + 23*12,596,224 + 20,979,712 + 6,738,939,904
    # = 7,050,828,800; the checkpoint adds the 24th layer and the post-LayerNorm (2048):
    # 7,063,427,072, the count published for llava-hf/llava-1.5-7b-hf ("7.06B")
    c = counts("llava-1.5-7b.model")
    tower = 1_196_032 + 23 * 12_596_224 + 20_979_712
    assert c.streams == {"image": tower}
    assert c.total == tower + 6_738_939_904 == 7_050_828_800
    assert c.total + 12_596_224 + 2048 == 7_063_427_072


def test_qwen3_30b_a3b() -> None:
    # d=2048, L=48, H=32, KV=4, hd=128, E=128, k=8, expert ff=768, V=151936, untied.
    # attn = 2048*4096 + 2*2048*512 + 4096*2048 + 2*128 (q_norm, k_norm) = 18,874,624
    # expert = 3*2048*768 = 4,718,592; router = 2048*128 = 262,144
    # layer = 18,874,624 + 128*4,718,592 + 262,144 + 4,096 = 623,120,640
    # total = 48*623,120,640 + 2*311,164,928 + 2,048 = 30,532,122,624      (30.5 B)
    # active layer = 18,874,624 + 8*4,718,592 + 262,144 + 4,096 = 56,889,600
    # active = 48*56,889,600 + 622,329,856 + 2,048 = 3,353,032,704          (3.3 B)
    c = counts("qwen3-30b-a3b.model")
    assert (c.total, c.active) == (30_532_122_624, 3_353_032_704)


def test_gemma2_9b() -> None:
    # d=3584, L=42, H=16, KV=8, hd=256, ff=14336, V=256000, tied.
    # attn = 3584*4096 + 2*3584*2048 + 4096*3584 = 44,040,192; mlp = 3*3584*14336 = 154,140,672
    # four RMSNorms per layer = 14,336; layer = 198,195,200
    # total = 42*198,195,200 + 917,504,000 + 3,584 = 9,241,705,984         (9.24 B)
    assert counts("gemma2-9b.model").total == 9_241_705_984


def test_gpt_oss_120b() -> None:
    # d=2880, L=36, H=64, KV=8, hd=64, E=128, k=4, expert ff=2880, V=201088, untied.
    # attn = (2880*4096+4096) + 2*(2880*512+512) + (4096*2880+2880) + 64 sinks = 26,550,144
    # expert = (2880*5760 + 5760) + (2880*2880 + 2880) = 24,891,840
    # router = 2880*128 + 128 = 368,768
    # layer = 26,550,144 + 128*24,891,840 + 368,768 + 5,760 = 3,213,080,192
    # total = 36*3,213,080,192 + 2*579,133,440 + 2,880 = 116,829,156,672    (116.8 B)
    # active layer = 26,550,144 + 4*24,891,840 + 368,768 + 5,760 = 126,492,032
    # active = 36*126,492,032 + 1,158,266,880 + 2,880 = 5,711,982,912
    # (OpenAI's "5.1 B active" leaves out the 579,133,440 embedding: 5,132,849,472.)
    c = counts("gpt-oss-120b.model")
    assert (c.total, c.active) == (116_829_156_672, 5_711_982_912)
    assert c.active - c.components[Component.embedding] == 5_132_849_472


def test_mamba2_2_7b() -> None:
    # d=2560, L=64, d_inner=5120, heads=5120/64=80, d_state=128, groups=1, d_conv=4,
    # V = ceil(50277/16)*16 = 50288, tied.
    # in_proj = 2560*(2*5120 + 2*128 + 80) = 27,074,560; conv = 5376*4 + 5376 = 26,880
    # dt_bias, A_log, D = 3*80; gated norm 5120; out_proj 5120*2560 = 13,107,200
    # layer = 40,214,000 + 2,560 (pre-norm) = 40,216,560
    # total = 64*40,216,560 + 50288*2560 + 2,560 = 2,702,599,680             (2.70 B)
    c = counts("mamba2-2.7b.model")
    assert c.total == 2_702_599_680
    assert c.components[Component.ssm] == 64 * 40_214_000


def test_gpt2() -> None:
    # d=768, L=12, ff=3072, V=50257, 1024 positions, biases everywhere, tied.
    # layer = 2*1536 (LNs) + (768*2304+2304) + (768*768+768) + (768*3072+3072) + (3072*768+768)
    #       = 7,087,872
    # total = 50257*768 + 1024*768 + 12*7,087,872 + 1,536 = 124,439,808      (124.4 M)
    assert counts("gpt2.model").total == 124_439_808


def test_vit_l16() -> None:
    # d=1024, L=24, ff=4096, 224 px, 16 px patches, 1000 classes.
    # patch conv = 3*16*16*1024 + 1024 = 787,456; class token 1024; positions 197*1024 = 201,728
    # layer = 2*2048 + 4*(1024*1024+1024) + (1024*4096+4096) + (4096*1024+1024) = 12,596,224
    # total = 787,456 + 1,024 + 201,728 + 24*12,596,224 + 2,048 + (1024*1000+1000)
    #       = 304,326,632                                                     (304.3 M)
    assert counts("vit-l16.model").total == 304_326_632


def test_bert_base_uncased() -> None:
    # BertModel: d=768, L=12, ff=3072, V=30522, 512 positions, 2 token types, biases
    # everywhere, post-LN, a pooler (dense 768×768 + bias).
    # embeddings = 30522*768 + 512*768 + 2*768 + 2*768 (their LayerNorm) = 23,837,184
    # layer = 4*(768*768+768) + 2*1536 + (768*3072+3072) + (3072*768+768) = 7,087,872
    # total = 23,837,184 + 12*7,087,872 + (768*768+768) = 109,482,240      (109.5 M)
    assert counts("bert-base-uncased.model").total == 109_482_240


def test_qwen3_next_80b_a3b() -> None:
    # d=2048, L=48 (36 Gated DeltaNet, 12 gated attention), V=151936, untied.
    # deltanet = 2048*(2*2048 + 2*4096) (q, k, v, z) + 2048*64 (β, gate) + 8192*4 (conv)
    #          + 2*32 (dt_bias, A_log) + 128 (gated norm) + 4096*2048 (out) = 33,718,464
    # attention = 2048*8192 (q and its gate) + 2*2048*512 (k, v) + 4096*2048 (o)
    #           + 2*256 (q, k norms) = 27,263,488
    # moe = 512 experts * 3*2048*512 + shared 3*2048*512 + its gate 2048 + router 2048*512
    #     = 1,614,809,088; norms 2*2048 per layer
    # total = 36*(33,718,464 + ...) + 12*(27,263,488 + ...) + 2*151936*2048 + 2048
    #       = 79,674,391,296 (81.3 B with the MTP module, as the model card counts)
    moe, norms = 512 * 3 * 2048 * 512 + 3 * 2048 * 512 + 2048 + 2048 * 512, 2 * 2048
    total = 36 * (33_718_464 + moe + norms) + 12 * (27_263_488 + moe + norms)
    total += 2 * 151936 * 2048 + 2048
    c = counts("qwen3-next-80b-a3b.model")
    assert c.total == total == 79_674_391_296
    # active: ten of the 512 routed experts
    assert c.active == total - 48 * 502 * 3 * 2048 * 512 == 3_874_929_408


def test_gemma3_27b() -> None:
    # d=5376, L=62, 32 query heads and 16 KV heads of 128, ff=21504, V=262208, tied.
    # layer = 5376*4096 (q) + 2*5376*2048 (k, v) + 4096*5376 (o) + 2*128 (q, k norms)
    #       + 3*5376*21504 (gate, up, down) + 4*5376 (norms) = 412,898,560
    # total = 262208*5376 + 62*412,898,560 + 5376 = 27,009,346,304 (the text model)
    assert counts("gemma3-27b.model").total == 27_009_346_304


def test_llama4_scout() -> None:
    # d=5120, L=48, 40 query heads and 8 KV heads of 128, 16 experts of 8192 (top 1) and
    # a shared expert of 8192 on every layer, V=202048, untied.
    # attention = 5120*5120 (q) + 2*5120*1024 (k, v) + 5120*5120 (o) = 62,914,560
    # expert = 3*5120*8192 = 125,829,120; router 5120*16 = 81,920; norms 2*5120
    # layer = 62,914,560 + 16*125,829,120 + 125,829,120 + 81,920 + 10,240 = 2,202,101,760
    # total = 2*202048*5120 + 48*2,202,101,760 + 5120 = 107,769,861,120 (the text model;
    # "109B" counts the vision tower too)
    # active: one routed expert, so 48*(2,202,101,760 - 15*125,829,120) + embeddings
    c = counts("llama4-scout.model")
    assert c.total == 107_769_861_120
    assert c.active == 2 * 202048 * 5120 + 48 * (2_202_101_760 - 15 * 125_829_120) + 5120
    assert c.active == 17_172_894_720  # "17B active"


@pytest.mark.parametrize("name", ["llama3-8b.model", "gpt2.model", "mamba2-2.7b.model"])
def test_dense_models_have_active_equal_total(name: str) -> None:
    c = counts(name)
    assert c.active == c.total
    assert sum(c.components.values()) == c.total
