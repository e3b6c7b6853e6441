"""Closed-form checks of every op record, forward and backward, under both conventions.

Each case states the expected counts as arithmetic derived by hand in the comment above
it (never by calling the code under test). `tl` gives the TraceLens-convention values
where they differ from modelcost's; elsewhere both conventions must agree.
"""

from dataclasses import dataclass, field

import pytest

from modelcost.base.dtypes import DType
from modelcost.perfmodel import (
    AdamStepOp,
    BinaryOp,
    CausalConv1dOp,
    CollectiveOp,
    ConvOp,
    CrossEntropyOp,
    DequantizeOp,
    EmbeddingOp,
    GatedDeltaNetOp,
    GatedDeltaStepOp,
    GemmOp,
    GroupedGemmOp,
    MambaSsdOp,
    MambaStepOp,
    MoECommOp,
    MoERoutingOp,
    NormOp,
    OffloadOp,
    OpRecord,
    QuantizeOp,
    ReduceOp,
    RingMergeOp,
    RopeOp,
    SdpaOp,
    SoftmaxOp,
    UnaryOp,
    Unit,
    bpe,
    exact_pairs,
    expected_experts_hit,
    trapezoid_pairs,
)

bf16, fp16, fp32 = DType.bf16, DType.fp16, DType.fp32
fp8, mxfp4 = DType.fp8_e4m3, DType.mxfp4


@dataclass
class Case:
    name: str
    op: OpRecord
    fwd: tuple  # (flops, bytes), modelcost
    bwd: tuple | None  # (flops, bytes), modelcost; None: no backward pass
    tl: dict = field(default_factory=dict)  # tracelens overrides: fwd=/bwd=


CASES = [
    # GEMM M=16 N=4096 K=1024 bf16: flops 2MNK; bytes (MK + NK + MN)·2;
    # bwd 4MNK; bytes dgrad (MN + NK + MK)·2 + wgrad (MN + MK + NK)·2
    Case("gemm-decode-bf16", GemmOp(16, 4096, 1024),
         fwd=(2 * 16 * 4096 * 1024, (16 * 1024 + 4096 * 1024 + 16 * 4096) * 2),
         bwd=(4 * 16 * 4096 * 1024, 2 * (16 * 4096 + 4096 * 1024 + 16 * 1024) * 2)),
    # GEMM M=2048 N=1024 K=512 + bias, fp8 × fp8 → bf16, bias bf16:
    # flops 2MNK + MN; bytes MK·1 + NK·1 + MN·2 + N·2; bwd 4MNK + MN;
    # bwd bytes: dgrad MN·2 + NK·1 + MK·1, wgrad the same, dbias MN·2 (read dY) + N·2.
    # TraceLens: 2(MN + NK + MK)·bpe(a)=1, plus MN *elements* for the bias.
    Case("gemm-fp8-bias", GemmOp(2048, 1024, 512, bias=True, a=fp8, b=fp8),
         fwd=(2 * 2048 * 1024 * 512 + 2048 * 1024,
              2048 * 512 + 512 * 1024 + 2048 * 1024 * 2 + 1024 * 2),
         bwd=(4 * 2048 * 1024 * 512 + 2048 * 1024,
              2 * (2048 * 1024 * 2 + 1024 * 512 + 2048 * 512) + 2048 * 1024 * 2 + 1024 * 2),
         tl={"bwd": (4 * 2048 * 1024 * 512 + 2048 * 1024,
                     2 * (2048 * 1024 + 1024 * 512 + 2048 * 512) + 2048 * 1024)}),
    # GroupedGemm 512 tokens × top-8 = 4096 rows, K=2048, N=768, G=128 experts, bf16:
    # flops 2MKN; bytes MK·2 + GKN·2 + MN·2; bwd 4MKN; 2MN·2 + 2MK·2 + 2GKN·2
    Case("grouped-bf16", GroupedGemmOp(4096, 2048, 768, 128),
         fwd=(2 * 4096 * 2048 * 768, (4096 * 2048 + 128 * 2048 * 768 + 4096 * 768) * 2),
         bwd=(4 * 4096 * 2048 * 768, (2 * 4096 * 768 + 2 * 4096 * 2048 + 2 * 128 * 2048 * 768) * 2)),
    # GroupedGemm with mxfp4 expert weights (0.5 B + one e8m0 byte per 32 = 0.53125 B):
    # M=32, K=2880, N=5760, G=4. TraceLens prices the weights at the input's 2 B.
    Case("grouped-mxfp4", GroupedGemmOp(32, 2880, 5760, 4, w=mxfp4),
         fwd=(2 * 32 * 2880 * 5760, 32 * 2880 * 2 + 4 * 2880 * 5760 * 0.53125 + 32 * 5760 * 2),
         bwd=(4 * 32 * 2880 * 5760,
              2 * 32 * 5760 * 2 + 2 * 32 * 2880 * 2 + 2 * 4 * 2880 * 5760 * 0.53125),
         tl={"fwd": (2 * 32 * 2880 * 5760, (32 * 2880 + 4 * 2880 * 5760) * 2 + 32 * 5760 * 2),
             "bwd": (4 * 32 * 2880 * 5760,
                     2 * 32 * 5760 * 2 + 2 * 32 * 2880 * 2 + 2 * 4 * 2880 * 5760 * 2)}),
    # SDPA causal prefill, B=1, S=4096, H_Q=32, H_KV=8, d=128, bf16.
    # exact pairs S(S+1)/2 = 8,390,656; flops 2·H_Q·pairs·(128+128).
    # bytes (Q + O)·2 + (K + V)·2 with Q = O = 4096·32·128, K = V = 4096·8·128.
    # bwd: 2·H_Q·pairs·(3·128 + 2·128) (recompute QKᵀ, dV, dP, dQ, dK) plus the GQA sum
    # of dK, dV over each group: S·(H_Q − H_KV)·(128 + 128) adds.
    # bwd bytes: read Q, O, dO, K, V and the fp32 LSE (32·4096·4); write dQ, dK, dV.
    # TraceLens: pairs S²/2; GQA adds S·128·(32//8 − 1) per dK and dV, halved; bytes
    # without O and LSE.
    Case("sdpa-prefill-gqa",
         SdpaOp(1, 4096, 32, 4096, 8, 128, 128, causal=True),
         fwd=(2 * 32 * 8_390_656 * 256, (2 * 4096 * 32 * 128 + 2 * 4096 * 8 * 128) * 2),
         bwd=(2 * 32 * 8_390_656 * 640 + 4096 * 24 * 256,
              3 * 4096 * 32 * 128 * 2 + 2 * 4096 * 8 * 128 * 2 + 32 * 4096 * 4
              + 4096 * 32 * 128 * 2 + 2 * 4096 * 8 * 128 * 2),
         tl={"fwd": (2 * 32 * 4096 * 4096 * 256 / 2, (2 * 4096 * 32 * 128 + 2 * 4096 * 8 * 128) * 2),
             "bwd": ((2 * 32 * 4096 * 4096 * 640 + 2 * 4096 * 128 * 3) / 2,
                     (3 * 4096 * 32 * 128 + 4 * 4096 * 8 * 128) * 2)}),
    # SDPA decode with a 128-token sliding window and an fp8 KV cache: B=8, one query
    # against 8192 cached keys, H_Q=64, H_KV=8, d=64. Pairs per sequence = 128; keys read
    # = 128. flops 2·8·64·128·(64+64); bytes (Q + O)·2 + (K + V)·1.
    # bwd flops 2·8·64·128·(3·64 + 2·64) + 8·128·(64 − 8)·128; bytes: Q, O, dO at 2 B,
    # K, V at 1 B, LSE 8·64·4; writes dQ (2 B), dK, dV (1 B).
    # TraceLens ignores the window and prices everything at 2 B: pairs 8192 − 1/2.
    Case("sdpa-decode-window-fp8kv",
         SdpaOp(8, 1, 64, 8192, 8, 64, 64, causal=True, window=128, kv=fp8),
         fwd=(2 * 8 * 64 * 128 * 128, (2 * 8 * 64 * 64) * 2 + (2 * 8 * 128 * 8 * 64) * 1),
         bwd=(2 * 8 * 64 * 128 * 320 + 8 * 128 * 56 * 128,
              3 * 8 * 64 * 64 * 2 + 2 * 8 * 128 * 8 * 64 + 8 * 64 * 4
              + 8 * 64 * 64 * 2 + 2 * 8 * 128 * 8 * 64),
         tl={"fwd": (2 * 8 * 64 * 8191.5 * 128, (2 * 8 * 64 * 64 + 2 * 8 * 8192 * 8 * 64) * 2),
             "bwd": ((2 * 8 * 64 * 8192 * 320 + 2 * 8 * 8192 * 64 * 7) * 8191.5 / 8192,
                     (3 * 8 * 64 * 64 + 4 * 8 * 8192 * 8 * 64) * 2)}),
    # Softmax B=8 over 4096 × 4096, bf16: 3 FLOPs and 2 tensors per element; bwd 2×
    Case("softmax-bf16", SoftmaxOp(4096, 4096, 8),
         fwd=(3 * 8 * 4096 * 4096, 2 * 8 * 4096 * 4096 * 2),
         bwd=(6 * 8 * 4096 * 4096, 4 * 8 * 4096 * 4096 * 2)),
    Case("softmax-fp32", SoftmaxOp(2, 1000, dtype=fp32),
         fwd=(3 * 2000, 2 * 2000 * 4), bwd=(6 * 2000, 4 * 2000 * 4)),
    # ViT-L/16 patch embedding: x (1,3,224,224), w (1024,3,16,16), stride 16, bias, bf16.
    # out (1,1024,14,14) = 200,704; flops out·2·3·16·16 + out; bytes (x + w + C_out + out)·2;
    # bwd flops 2·conv + out; bytes 2·(out + w + x)·2 + (out + C_out)·2 (TraceLens: unscaled)
    Case("conv-patch-bf16",
         ConvOp((1, 3, 224, 224), (1024, 3, 16, 16), stride=(16,), bias=True),
         fwd=(200_704 * 1536 + 200_704, (150_528 + 786_432 + 1024 + 200_704) * 2),
         bwd=(2 * 200_704 * 1536 + 200_704,
              2 * (200_704 + 786_432 + 150_528) * 2 + (200_704 + 1024) * 2),
         tl={"bwd": (2 * 200_704 * 1536 + 200_704,
                     2 * (200_704 + 786_432 + 150_528) * 2 + (200_704 + 1024))}),
    # grouped conv (32 groups), x (4,256,32,32), w (256,8,3,3), stride 2, pad 1, fp32:
    # out (4,256,16,16) = 262,144; flops out·2·8·3·3; bytes (x + w + out)·4
    Case("conv-grouped-fp32",
         ConvOp((4, 256, 32, 32), (256, 8, 3, 3), stride=(2,), padding=(1,), dtype=fp32),
         fwd=(262_144 * 144, (1_048_576 + 18_432 + 262_144) * 4),
         bwd=(2 * 262_144 * 144, 2 * (262_144 + 18_432 + 1_048_576) * 4)),
    # LayerNorm at inference, E = 2048·768, C = 768, weight and bias, bf16:
    # modelcost (not training): 6C + 2E FLOPs; 2E·2 + (2 + 1 + 1)·C·2 bytes.
    # TraceLens always counts training: 6C + 5E; (2 + 1 + 1 + 2)·C·2.
    # bwd (training): C·(4 + 5)·E/C = 9E FLOPs; E·2 + 2E·2 + C·2 + C·2 + 2C·2 bytes.
    Case("layernorm-bf16",
         NormOp("layernorm", 2048 * 768, 768, has_bias=True),
         fwd=(6 * 768 + 2 * 2048 * 768, 2 * 2048 * 768 * 2 + 4 * 768 * 2),
         bwd=(9 * 2048 * 768, 6 * 2048 * 768 + 4 * 768 * 2),
         tl={"fwd": (6 * 768 + 5 * 2048 * 768, 2 * 2048 * 768 * 2 + 6 * 768 * 2)}),
    # RMSNorm fp32, 4 rows of 4096: rows·(2C + 2) + 2E; 2E·4 + C·4;
    # bwd E (affine) + E + 6E + E + E (rows > 1) = 10E; E·4 + 2E·4 + 2C·4
    Case("rmsnorm-fp32", NormOp("rmsnorm", 4 * 4096, 4096, dtype=fp32),
         fwd=(4 * (2 * 4096 + 2) + 2 * 16_384, 2 * 16_384 * 4 + 4096 * 4),
         bwd=(10 * 16_384, 16_384 * 4 + 2 * 16_384 * 4 + 2 * 4096 * 4)),
    # SiLU over (8, 4096) bf16: 4 FLOPs per element (TraceLens counts 1); bytes in + out;
    # bwd (4 + 1) per element; read x, dy, write dx
    Case("silu-bf16", UnaryOp((8, 4096), "silu"),
         fwd=(4 * 32_768, 32_768 * 4), bwd=(5 * 32_768, 3 * 32_768 * 2),
         tl={"fwd": (32_768, 32_768 * 4)}),
    Case("gelu-fp32", UnaryOp((10,), "gelu", x=fp32, out=fp32),
         fwd=(80, 80), bwd=(90, 120), tl={"fwd": (10, 80)}),
    # residual add (2048, 4096) bf16: n FLOPs; 3n·2 bytes; bwd: dA = dB = dY, no FLOPs
    Case("add-bf16", BinaryOp((2048, 4096), (2048, 4096)),
         fwd=(8_388_608, 3 * 8_388_608 * 2), bwd=(0, 3 * 8_388_608 * 2)),
    # (16, 1024) · (1024,) fp32: n_out = 16,384; bwd 2 FLOPs per element plus folding the
    # broadcast operand's gradient (16,384 − 1024 adds); reads a, b; writes da, db
    Case("mul-broadcast-fp32", BinaryOp((16, 1024), (1024,), "mul", a=fp32, b=fp32, out=fp32),
         fwd=(16_384, (16_384 + 1024 + 16_384) * 4),
         bwd=(2 * 16_384 + 15_360, (16_384 + 16_384 + 1024 + 16_384 + 1024) * 4)),
    # sum over the last dim of (8, 2048, 4096) bf16: out 16,384 (TraceLens: 1)
    Case("reduce-rows-bf16", ReduceOp((8, 2048, 4096), (-1,)),
         fwd=(67_108_864, 67_108_864 * 2 + 16_384 * 2),
         bwd=(67_108_864, 67_108_864 * 2 + 16_384 * 2),
         tl={"fwd": (67_108_864, 67_108_864 * 2 + 2), "bwd": (67_108_864, 67_108_864 * 2 + 2)}),
    Case("reduce-mean-fp32", ReduceOp((4, 10), (0,), "mean", x=fp32, out=fp32),
         fwd=(40, 160 + 40), bwd=(40, 160 + 40), tl={"fwd": (40, 164), "bwd": (40, 164)}),
    # MoE dispatch: tokens·hidden·bpe, no FLOPs; the same backward
    Case("dispatch-bf16", MoECommOp(4096, 7168), fwd=(0, 4096 * 7168 * 2), bwd=(0, 4096 * 7168 * 2)),
    Case("combine-fp8", MoECommOp(100, 2880, "combine", fp8), fwd=(0, 288_000), bwd=(0, 288_000)),
    # routing T=1024 over E=256, top-8, sigmoid on fp32 logits:
    # 4TE (sigmoid) + TEk (k max passes) + 2Tk; bytes TE·4 + Tk·(4 + 4)
    # bwd 3TE + 2Tk; bytes Tk·8 + 2·TE·4
    Case("routing-sigmoid-fp32", MoERoutingOp(1024, 256, 8, "sigmoid", fp32),
         fwd=(4 * 262_144 + 262_144 * 8 + 2 * 8192, 262_144 * 4 + 8192 * 8),
         bwd=(3 * 262_144 + 2 * 8192, 8192 * 8 + 2 * 262_144 * 4)),
    Case("routing-softmax-bf16", MoERoutingOp(16, 8, 2),
         fwd=(3 * 128 + 128 * 2 + 64, 128 * 2 + 32 * 8), bwd=(3 * 128 + 64, 32 * 8 + 2 * 128 * 2)),
    # Mamba-2 SSD, TraceLens's vector shape (B=2, T=4096, H=64, P=64, G=8, N=128, L=256):
    # terms conv 402,653,184; CBᵀ 4,294,967,296; intra 17,179,869,184; states and output
    # 8,589,934,592 each. bwd = 2·conv + 2·matmuls + recomputed (CBᵀ + states).
    # bwd bytes = the forward's + dzxbcdt (2·4096·10304·2) + dconv (6144·5·2) + dparams (3·64·4)
    Case("ssd-vector-bf16", MambaSsdOp(2, 4096, 64, 64, 8, 128, 256, 4),
         fwd=(39_057_358_848, 235_991_808),
         bwd=(2 * 402_653_184 + 2 * 38_654_705_664 + 4_294_967_296 + 8_589_934_592,
              235_991_808 + 2 * 4096 * 10304 * 2 + 6144 * 5 * 2 + 3 * 64 * 4),
         tl={"bwd": (39_057_358_848, 235_991_808)}),
    # Mamba-2 2.7B mixer, B=1, T=2048, H=80, P=64, G=1, N=128, L=256, fp16:
    # conv_channels 5376, combined 10576; conv 2·5376·2048·4; CBᵀ 2·2048·256·128;
    # intra 2·80·2048·256·64; states = output = 2·80·2048·128·64.
    # bytes 2048·10576·2 + 5376·4·2 + 5376·2 + 80·(4+4+4) + 2048·5120·2
    Case("ssd-mamba2-fp16", MambaSsdOp(1, 2048, 80, 64, 1, 128, 256, 4, dtype=fp16),
         fwd=(88_080_384 + 134_217_728 + 5_368_709_120 + 2 * 2_684_354_560,
              2048 * 10576 * 2 + 5376 * 4 * 2 + 5376 * 2 + 80 * 12 + 2048 * 5120 * 2),
         bwd=(2 * 88_080_384 + 2 * (134_217_728 + 5_368_709_120 + 2 * 2_684_354_560)
              + 134_217_728 + 2_684_354_560,
              64_345_536 + 2048 * 10576 * 2 + 5376 * 5 * 2 + 80 * 12),
         tl={"bwd": (10_959_716_352, 64_345_536)}),
    # Mamba-2 decode step, B=4, H=80, P=64, G=1, N=128, d_conv=4, fp32 state:
    # conv 2·4·5376·4; SSM 6·4·80·64·128; D·x 2·4·80·64.
    # bytes: states in and out 2·4·(80·64·128·4 + 5376·4·2); conv weight and bias
    # 5376·5·2; dt_bias, A, D 3·80·4; zxbcdt in 4·10576·2; y out 4·5120·2
    Case("mamba-step-bf16", MambaStepOp(4, 80, 64, 1, 128, 4),
         fwd=(2 * 4 * 5376 * 4 + 6 * 4 * 80 * 64 * 128 + 2 * 4 * 80 * 64,
              2 * 4 * (80 * 64 * 128 * 4 + 5376 * 4 * 2) + 5376 * 5 * 2 + 3 * 80 * 4
              + 4 * 10576 * 2 + 4 * 5120 * 2),
         bwd=None),
    Case("mamba-step-fp16", MambaStepOp(1, 2, 4, 1, 8, 2, dtype=fp16, state=fp16),
         fwd=(2 * 24 * 2 + 6 * 2 * 4 * 8 + 2 * 8,
              2 * (64 * 2 + 24 * 2 * 2) + 24 * 3 * 2 + 3 * 2 * 4 + 34 * 2 + 8 * 2),
         bwd=None),
    # Gated DeltaNet, 1×128 tokens, 32 value heads / 16 key heads of 128, chunks of 64:
    # conv 2·8192·128·4; per head and chunk 6C²dk + 4C²dv + 6C·dk·dv + C³/3; bytes: q,k,v
    # and β, gate in 128·(8192 + 64)·2, conv weight 8192·4·2, out 128·4096·2, the final
    # fp32 state 32·128·128·4, dt_bias and A_log 2·32·4; the backward twice the forward
    Case("deltanet-bf16", GatedDeltaNetOp(1, 128, 32, 16, 128, 128, 64, 4),
         fwd=(2 * 8192 * 128 * 4 + 32 * 2 * (6 * 64**2 * 128 + 4 * 64**2 * 128
                                            + 6 * 64 * 128 * 128 + 64**3 // 3),
              128 * 8256 * 2 + 8192 * 4 * 2 + 128 * 4096 * 2 + 32 * 128 * 128 * 4 + 256),
         bwd=(2 * 752_178_496, 2 * 5_325_056)),
    # 2×10 tokens, 2 heads (1 key head) of 4, chunks of 8 (two of them, the last short)
    Case("deltanet-fp32", GatedDeltaNetOp(2, 10, 2, 1, 4, 4, 8, 2, dtype=fp32, state=fp32),
         fwd=(2 * 2 * 16 * 10 * 2 + 2 * 2 * 2 * (6 * 64 * 4 + 4 * 64 * 4 + 6 * 8 * 16 + 512 // 3),
              20 * 20 * 4 + 16 * 2 * 4 + 20 * 8 * 4 + 2 * 2 * 16 * 4 + 16),
         bwd=(2 * 29_264, 2 * 2_640)),
    # its decode step: 7 FLOPs per state element; states read and written
    Case("deltanet-step-bf16", GatedDeltaStepOp(4, 32, 16, 128, 128, 4),
         fwd=(2 * 4 * 8192 * 4 + 7 * 4 * 32 * 128 * 128,
              2 * 4 * (32 * 128 * 128 * 4 + 8192 * 4 * 2) + 4 * (8256 + 4096) * 2
              + 8192 * 4 * 2 + 256),
         bwd=None),
    Case("deltanet-step-fp16", GatedDeltaStepOp(1, 2, 1, 4, 4, 2, dtype=fp16, state=fp16),
         fwd=(2 * 16 * 2 + 7 * 2 * 16, 2 * (2 * 16 * 2 + 16 * 2 * 2) + 28 * 2 + 16 * 2 * 2 + 16),
         bwd=None),
    # causal conv1d (4, 4096, 2048), k=4, bias, bf16: 2bcsk; (2bcs + ck + c)·2;
    # bwd 2·2bcsk + bcs (db); (3bcs + 2ck + c)·2
    Case("conv1d-bf16", CausalConv1dOp(4, 4096, 2048, 4),
         fwd=(268_435_456, 134_258_688),
         bwd=(2 * 268_435_456 + 4 * 4096 * 2048, (3 * 33_554_432 + 2 * 16_384 + 4096) * 2)),
    Case("conv1d-fp32", CausalConv1dOp(1, 10, 5, 3, bias=False, dtype=fp32),
         fwd=(300, (100 + 30) * 4), bwd=(600, (150 + 60) * 4)),
    # embedding, 2048 tokens of a 128256 × 4096 bf16 table: gather rows, read int64 ids,
    # write rows; bwd scatter-adds (T·d FLOPs), reading dY and ids, updating the rows
    Case("embed-bf16", EmbeddingOp(2048, 128_256, 4096),
         fwd=(0, 2048 * 4096 * 2 * 2 + 2048 * 8),
         bwd=(2048 * 4096, 2048 * 4096 * 2 + 2048 * 8 + 2 * 2048 * 4096 * 2)),
    Case("embed-fp32-table", EmbeddingOp(3, 10, 4, weight=fp32),
         fwd=(0, 12 * 4 + 24 + 12 * 2), bwd=(12, 12 * 2 + 24 + 2 * 12 * 4)),
    # RoPE on 2048 tokens × 32 heads × 128: 3E FLOPs, 2E·bpe bytes, the same backward
    Case("rope-bf16", RopeOp(2048, 32, 128),
         fwd=(3 * 8_388_608, 2 * 8_388_608 * 2), bwd=(3 * 8_388_608, 2 * 8_388_608 * 2)),
    Case("rope-fp32", RopeOp(1, 8, 64, fp32), fwd=(1536, 4096), bwd=(1536, 4096)),
    # cross-entropy over (8192, 128256) bf16: 5TV; TV·2 + 8T + 4T;
    # bwd 4TV; 2·TV·2 + 12T
    Case("xent-bf16", CrossEntropyOp(8192, 128_256),
         fwd=(5 * 8192 * 128_256, 8192 * 128_256 * 2 + 12 * 8192),
         bwd=(4 * 8192 * 128_256, 2 * 8192 * 128_256 * 2 + 12 * 8192)),
    Case("xent-fp32", CrossEntropyOp(4, 10, fp32), fwd=(200, 160 + 48), bwd=(160, 320 + 48)),
    # ring all-reduce of 8,388,608 bf16 values over 8 devices: sends 2·7/8·S·2 bytes,
    # adds 7/8·S; the backward is another all-reduce
    Case("allreduce-8", CollectiveOp("all_reduce", 8_388_608, 8),
         fwd=(7 * 8_388_608 // 8, 2 * 7 * 8_388_608 * 2 // 8),
         bwd=(7 * 8_388_608 // 8, 2 * 7 * 8_388_608 * 2 // 8)),
    # all-gather of 1000 fp32 over 4: sends 3/4·1000·4; its backward is a reduce-scatter
    Case("allgather-4", CollectiveOp("all_gather", 1000, 4, fp32),
         fwd=(0, 3000), bwd=(750, 3000)),
    Case("alltoall-2", CollectiveOp("all_to_all", 3, 2, fp32), fwd=(0, 6), bwd=(0, 6)),
    Case("collective-alone", CollectiveOp("all_reduce", 1000, 1), fwd=(0, 0), bwd=(0, 0)),
    # AdamW over 1M bf16 params with fp32 states and master weights: 15 FLOPs each;
    # bytes: grad 2 + m, v in and out 16 + master in and out 8 + bf16 copy out 2
    Case("adam-mixed", AdamStepOp(1_000_000), fwd=(15_000_000, 28_000_000), bwd=None),
    # fp32 params, no master copy: grad 4 + states 16 + params in and out 8
    Case("adam-fp32", AdamStepOp(10, fp32, fp32, master_weights=False), fwd=(150, 280), bwd=None),
    # activation offloading: the saved bytes out in the forward, back in the backward,
    # no arithmetic (Transformer Engine's CPU offload copies them as they are)
    Case("offload-1-layer", OffloadOp(4_560_000_000, 1), fwd=(0, 4_560_000_000),
         bwd=(0, 4_560_000_000)),
    Case("offload-40-layers", OffloadOp(123, 40), fwd=(0, 123), bwd=(0, 123)),
    # ring attention's bookkeeping, 2 steps (cp 2), causal, q = o = 100, kv = 40, bf16:
    # forward kv concatenated (2·40), O set (2·100) and corrected once (3·100), a multiply
    # then a multiply and an add an element; backward kv copied (2·40), dq set and added
    # to (2·100 + 3·100, 100 adds), dk/dv set over half (2·20) and added to whole at the
    # diagonal (3·40, 40 adds)
    Case("ring-merge-2-steps", RingMergeOp(100, 100, 40, 2),
         fwd=(100 + 200, (80 + 200 + 300) * 2), bwd=(100 + 40, (80 + 500 + 40 + 120) * 2)),
    # 3 steps without a mask, fp32: each later step corrects O (3·6) and adds to dq
    # (3·10) and to the whole dk/dv (3·4)
    Case("ring-merge-3-steps-no-mask", RingMergeOp(10, 6, 4, 3, False, DType.fp32),
         fwd=(6 + 2 * 2 * 6, (8 + 12 + 36) * 4), bwd=(2 * 10 + 2 * 4, (8 + 80 + 32) * 4)),
    # quantize 4096 bf16 → mxfp4: absmax, scale, convert (3 per element);
    # bytes 4096·(2 + 0.5 + 1/32)
    Case("quant-mxfp4", QuantizeOp(4096, bf16, mxfp4),
         fwd=(3 * 4096, 4096 * 2.53125), bwd=(3 * 4096, 4096 * 2.53125)),
    Case("quant-fp8", QuantizeOp(1000, fp32, fp8), fwd=(2000, 5000), bwd=(2000, 5000)),
    Case("dequant-mxfp4", DequantizeOp(1024), fwd=(1024, 1024 * 2.53125), bwd=(1024, 2592)),
    Case("dequant-fp8", DequantizeOp(100, fp8, fp32), fwd=(100, 500), bwd=(100, 500)),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_closed_form(case: Case) -> None:
    op = case.op
    assert (op.flops(), op.bytes()) == case.fwd
    assert (op.tracelens_flops(), op.tracelens_bytes()) == case.tl.get("fwd", case.fwd)
    assert op.cost().flops == case.fwd[0] and op.cost().bytes == case.fwd[1]
    if case.bwd is None:
        with pytest.raises(ValueError):
            op.flops_bwd()
        return
    assert (op.flops_bwd(), op.bytes_bwd()) == case.bwd
    assert (op.tracelens_flops_bwd(), op.tracelens_bytes_bwd()) == case.tl.get("bwd", case.bwd)


def test_every_op_record_has_two_cases() -> None:
    kinds: dict[type, int] = {}
    for c in CASES:
        kinds[type(c.op)] = kinds.get(type(c.op), 0) + 1
    assert all(n >= 2 for n in kinds.values()), kinds
    every = {c.__name__ for c in OpRecord.__subclasses__()}
    assert {k.__name__ for k in kinds} == every  # every record is exercised


def test_units_and_precision() -> None:
    assert GemmOp(1, 1, 1).unit is Unit.matrix
    assert GemmOp(1, 1, 1, a=fp8, b=fp8).precision == "fp8"
    assert GemmOp(1, 1, 1, a=bf16, b=DType.int4).precision == "bf16"  # weight-only int4
    assert GroupedGemmOp(1, 1, 1, 1, x=mxfp4, w=mxfp4).precision == "fp4"
    assert SdpaOp(1, 1, 1, 1, 1, 1, 1, False).unit is Unit.matrix
    assert NormOp("rmsnorm", 8, 8, dtype=fp32).precision == "fp32"
    assert CollectiveOp("all_reduce", 8, 2).unit is Unit.network


def test_bytes_per_element_table() -> None:
    # fp32 4, bf16/fp16 2, fp8/int8 1, fp6 0.75, fp4/int4 0.5; MX adds 1 byte per 32
    assert [bpe(d) for d in (fp32, bf16, fp16, fp8, DType.int8)] == [4, 2, 2, 1, 1]
    assert [bpe(d) for d in (DType.fp6_e2m3, DType.fp4, DType.int4)] == [0.75, 0.5, 0.5]
    assert bpe(mxfp4) == 0.5 + 1 / 32
    assert bpe(DType.mxfp8) == 1 + 1 / 32
    assert bpe(DType.nvfp4) == 0.5 + 1 / 16


def test_exact_and_trapezoid_pairs() -> None:
    # square causal: S(S+1)/2 exactly; TraceLens's S²/2
    assert exact_pairs(4, 4, True) == 10 and trapezoid_pairs(4, 4) == 8
    # chunked prefill: 2 new queries after 3 cached keys (5 keys): 4 + 5 keys seen
    assert exact_pairs(2, 5, True) == 9 and trapezoid_pairs(2, 5) == 8
    # decode: the one query sees every key (capped by a window)
    assert exact_pairs(1, 2048, True) == 2048
    assert exact_pairs(1, 2048, True, window=128) == 128
    # window 3 over a square causal 5: 1 + 2 + 3 + 3 + 3
    assert exact_pairs(5, 5, True, window=3) == 12
    assert exact_pairs(3, 7, False) == 21


def test_expected_experts_hit() -> None:
    # E·(1 − ((E − k)/E)^T)
    assert expected_experts_hit(8, 2, 1) == 2
    assert expected_experts_hit(8, 2, 2) == 8 * (1 - 0.75**2) == 3.5
    assert expected_experts_hit(256, 8, 1) == 8
    assert expected_experts_hit(256, 8, 4096) == pytest.approx(256)


def test_transposed_conv_output_shape() -> None:
    # (16 − 1)·2 − 2·1 + 1·(4 − 1) + 0 + 1 = 32, channels = w[1]
    op = ConvOp((1, 512, 16, 16), (512, 256, 4, 4), stride=(2,), padding=(1,), transposed=True)
    assert op.out_shape == (1, 256, 32, 32)
    # transposed flops are counted on the input: prod(x)·2·prod(w[1:])
    assert op.flops() == 512 * 16 * 16 * 2 * 256 * 16


def test_causal_chunk_is_not_an_error_in_either_convention() -> None:
    # 512 new queries after 1536 cached keys, 8 heads of 64, MHA
    op = SdpaOp(1, 512, 8, 2048, 8, 64, 64, causal=True)
    pairs_exact = 512 * 1536 + 512 * 513 // 2
    assert op.flops() == 2 * 8 * pairs_exact * 128
    assert op.tracelens_flops() == 2 * 8 * (512 * 2048 - 512 * 512 / 2) * 128


def test_sdpa_bytes_follow_the_real_dtype() -> None:
    # fp32 attention (1, 16, 1024, 64): modelcost 4 B per element, TraceLens 2 B
    op = SdpaOp(1, 1024, 16, 1024, 16, 64, 64, False, act=fp32, kv=fp32)
    assert op.bytes() == 4 * 1024 * 16 * 64 * 4
    assert op.tracelens_bytes() == 4 * 1024 * 16 * 64 * 2
