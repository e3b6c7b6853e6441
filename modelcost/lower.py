"""Stage 3, lower: a Spec and a workload → an OpGraph of perf-model op records.

Identical repeated layers are lowered once and carry a multiplicity; each distinct
layer kind of a heterogeneous stack (dense then MoE, local/global alternation) is its
own group. Each IR layer statement lowers to the ops its reference implementation runs
(`attention` → q/k/v projections, RoPE, SDPA, o projection, ...).
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Literal

from msgspec import Struct, field

from . import spec as ir
from .dtypes import DType
from .errors import SpecError, did_you_mean
from .graph import (
    DEFAULT_CONTEXT,
    DEFAULT_SEQ,
    Group,
    ModelFacts,
    Node,
    OpGraph,
    Phase,
    Shape,
    Workload,
    settled,
)
from .memo import per_object
from .memory import SSM_STATE, Held, cache_elements_per_token, model_facts
from .parallel import check_layout
from .params import kv_heads, residual_width, streams_of, vocab_shard, walk
from .perfmodel import (
    AdamStepOp,
    BinaryOp,
    CollectiveOp,
    ConvOp,
    CrossEntropyOp,
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
    OpRecord,
    QuantizeOp,
    ReduceOp,
    RopeOp,
    SdpaOp,
    UnaryOp,
    bpe,
    expected_experts_hit,
)
from .perfmodel.base import Number
from .perfmodel.collectives import CollectiveKind
from .perfmodel.misc import LOSS_BYTES
from .perfmodel.moe import ROUTER_INDEX_BYTES, ROUTER_PROB_BYTES
from .recipes import NO_RECIPE, RECIPES, Recipe
from .record import Record, replace

ROUTE_BYTES = ROUTER_PROB_BYTES + ROUTER_INDEX_BYTES  # a routing decision: weight and id

ACT_FN = {
    ir.Activation.swiglu: "silu",
    ir.Activation.silu: "silu",
    ir.Activation.geglu: "gelu_tanh",
    ir.Activation.gelu: "gelu",
    ir.Activation.gelu_tanh: "gelu_tanh",
    ir.Activation.quick_gelu: "quick_gelu",
    ir.Activation.relu: "relu",
}
# Distinct ops after lowering (repeated layers count once): 20× the first bound, room for
# a heterogeneous model (Nemotron-Ultra-253B: 162 different layers, ~2,600 ops) or 1,800
# distinct Llama-like layers (16 ops each). Lowering stops at the first op past it. The
# worst accepted input (tests/hostile.py "most-ops", ~30,000 ops a phase), measured
# through the CLI on this project's 2-core machine: check 0.6 s; compile --format json
# ~1.5-2 s and 270 MB; --format html ~8 s and 380 MB; three phases in JSON ~5 s, 750 MB.
# Time and memory grow linearly with the ops (~25 µs and ~8 KB an op in a report).
MAX_NODES = 30_000
MLA_DECODE_NOTE = (
    "MLA decode uses the absorbed form: attention runs over the compressed latent cache "
    "(one KV head, d_qk = kv_lora_rank + qk_rope_head_dim, d_v = kv_lora_rank); W_UK and "
    "W_UV are applied as per-head batched GEMMs."
)


class _Emit(Struct):
    """Collects the nodes of one scope (a layer, or the model level) with stable names."""

    prefix: str
    group: str
    count: int
    stream: str  # the node whose output is the residual stream now
    residual_from: str
    nodes: list[Node] = field(default_factory=list)
    used: Counter = field(default_factory=Counter)
    totals: Counter = field(default_factory=Counter)
    quantized: dict[tuple[str, DType], str] = field(default_factory=dict)  # (x, dtype) → node

    def scope(self, base: str) -> str:
        """`attn`, or `norm.0`, `norm.1`, ... when a kind occurs more than once."""
        if self.totals[base] <= 1:
            return base
        name = f"{base}.{self.used[base]}"
        self.used[base] += 1
        return name

    def add(
        self, name: str, op: OpRecord, inputs: tuple[str, ...], *, out: float = 0.0, step=False
    ) -> str:
        full = f"{self.prefix}{name}" if self.prefix else name
        self.nodes.append(Node(full, self.group, self.count, op, inputs, out, step))
        return full


def _gemm(
    M: int,
    N: int,
    K: int,
    bias: bool,
    d: ir.DtypePolicy,
    weight: DType | None = None,
    batch: int = 1,
    quantized: bool = True,
) -> GemmOp:
    """A linear layer's GEMM; under a precision recipe (unless `quantized` is off, or
    the weight dtype is given) it takes its activations as the recipe quantizes them
    and reads both operands' scales."""
    a, w = d.activations, weight or d.weights
    recipe = RECIPES[d.recipe] if quantized and weight is None else NO_RECIPE
    x = recipe.activations or a
    scales = batch * _scale_bytes(recipe, M, N, K)
    return GemmOp(M, N, K, bias, batch, a=x, b=w, out=a, bias_dtype=a, scale_bytes=scales)


def _scale_bytes(recipe: Recipe, M: int, N: int, K: int, experts: Number = 1) -> Number:
    """Bytes of the scales a GEMM reads: the weights' (N×K per expert) and the
    activations' (M×K)."""
    total: Number = 0
    if recipe.weight_scales is not None:
        sc = recipe.weight_scales
        total += experts * sc.count(N, K) * bpe(sc.dtype)
    if recipe.activation_scales is not None:
        sc = recipe.activation_scales
        total += sc.count(M, K) * bpe(sc.dtype)
    return total


class _Lowerer:
    def __init__(self, spec: ir.Spec, shape: Shape) -> None:
        self.spec, self.s = spec, shape
        self.par, self.tp = shape.par, shape.par.tp
        self.notes: list[str] = []
        self.recipe = NO_RECIPE
        self.outputs: dict[str, str] = {}  # each stream lowered so far: its output node
        self.hidden = ""  # the main stream's last layer output
        # other streams' tokens still to join the main one (decode finds them cached)
        self.joining = bool(shape.joins) and not shape.decode

    # ---- tensor parallelism: the collectives around a column-/row-parallel pair
    def _collective(
        self,
        e: _Emit,
        name: str,
        kind: CollectiveKind,
        elements: int,
        a: DType,
        x: str | tuple[str, ...],
        over: Literal["tp", "cp", "ep"] = "tp",
    ) -> str:
        """A collective over this rank's tp group (adjacent ranks), its context-parallel
        group (tp apart) or its expert-parallel group."""
        par = self.par
        groups = {"tp": (par.tp, 1), "cp": (par.cp, par.tp), "ep": (par.ep, par.ep_stride)}
        group, stride = groups[over]
        rec = CollectiveOp(kind, elements, group, a, stride)
        out = elements * bpe(a) / (group if kind == "reduce_scatter" else 1)
        return e.add(name, rec, x if isinstance(x, tuple) else (x,), out=out)

    def _keys(self, op: ir.Attention | ir.MLA) -> int:
        """Keys an SDPA op attends over (a chunked layer's decode: its chunk's). Under
        context parallelism a rank's queries are
        two chunks, one early and one late (Megatron-LM's load balancing), which attend
        exactly the causal pairs of S/cp queries over the last (S + S/cp)/2 keys: 1/cp
        of all of them."""
        s = self.s
        if s.decode and isinstance(op, ir.Attention) and op.chunk:
            return (s.n_kv - 1) % op.chunk + 1  # the new token sees its own chunk only
        if self.par.cp == 1 or s.decode or not op.causal:
            return s.n_kv
        return (s.n_kv + s.S) // 2

    def _ring(self, e: _Emit, name: str, per_token: int, a: DType, x) -> str:
        """Ring attention's key/value exchange: every rank receives every other rank's
        chunk, an all-gather's volume (its gradients go back as a reduce-scatter)."""
        if self.par.cp == 1:
            return x if isinstance(x, str) else x[0]
        elements = self.s.B * self.s.n_kv * per_token
        return self._collective(e, f"{name}.kv_ring", "all_gather", elements, a, x, "cp")

    def _enter(self, e: _Emit, name: str, dim: int, a: DType) -> str:
        """The layer's input on every tp rank: gathered from 1/tp of the tokens under
        sequence parallelism (else already replicated)."""
        if not self.par.sp:
            return e.stream
        return self._collective(e, f"{name}.all_gather", "all_gather", self.s.T * dim, a, e.stream)

    def _exit(self, e: _Emit, name: str, dim: int, a: DType, x: str) -> str:
        """The row-parallel output's partial sums combined: an all-reduce, or a
        reduce-scatter to 1/tp of the tokens under sequence parallelism."""
        if self.tp == 1:
            return x
        kind: CollectiveKind = "reduce_scatter" if self.par.sp else "all_reduce"
        return self._collective(e, f"{name}.{kind}", kind, self.s.T * dim, a, x)

    # ---- one method per IR op kind (`_attention`, `_moe`, ...); each emits its nodes
    # and leaves `e.stream` naming the node that carries the residual stream on
    def lower(self, e: _Emit, op: ir.Op, times: int) -> None:
        """Emit `op`'s nodes; `times` multiplies the scope's count (a nested repeat)."""
        emit = getattr(self, f"_{op.kind}")
        count_before = e.count
        e.count = count_before * times
        self.recipe = RECIPES[op.dtypes.recipe]  # the precision recipe its GEMMs follow
        try:
            emit(e, op, e.scope(op.scope))
        finally:
            e.count = count_before

    def _act(self, op: ir.Op | ir.Norm) -> DType:
        return op.dtypes.activations

    def _embed(self, e: _Emit, op: ir.Embedding, name: str) -> None:
        s, d = self.s, op.dtypes
        a = d.activations
        joined = s.B * s.joined if self.joining else 0  # their places are not looked up
        rec = EmbeddingOp(s.T - joined, vocab_shard(op.vocab, self.tp), op.dim, d.weights, a)
        x = e.add(name, rec, (), out=(s.T - joined) * op.dim * bpe(a))
        x = self._exit(e, name, op.dim, a, x)
        if joined:  # the towers' tokens written into their places (LLaVA's masked scatter)
            self.joining = False
            rec_join = UnaryOp((joined, op.dim), "copy", a, a)
            sources = tuple(self.outputs[n] for n, _ in s.joins if n in self.outputs)
            x = e.add(f"{name}.join", rec_join, (x, *sources), out=s.T * op.dim * bpe(a))
        e.stream = e.residual_from = x

    def _pos_embed(self, e: _Emit, op: ir.PositionEmbedding, name: str) -> None:
        self._added_table(e, op.positions, op, name)

    def _type_embed(self, e: _Emit, op: ir.TokenTypeEmbedding, name: str) -> None:
        self._added_table(e, op.types, op, name)

    def _added_table(self, e: _Emit, rows: int, op: ir.Op, name: str) -> None:
        """A learned table looked up per token and added to the stream."""
        s, d = self.s, op.dtypes
        T = s.T_seq
        rec = EmbeddingOp(T, rows, op.dim, d.weights, d.activations)
        out = T * op.dim * bpe(d.activations)
        pos = e.add(name, rec, (), out=out)
        add = BinaryOp((T, op.dim), (T, op.dim), "add", *(d.activations,) * 3)
        e.stream = e.residual_from = e.add(f"{name}.add", add, (e.stream, pos), out=out)

    def _patch_embed(self, e: _Emit, op: ir.PatchEmbed, name: str) -> None:
        d = op.dtypes
        x = (self.s.B, op.channels, op.image, op.image)
        w = (op.dim, op.channels, op.patch, op.patch)
        rec = ConvOp(x, w, stride=(op.patch,), bias=op.bias, dtype=d.activations)
        out = self.s.T * op.dim * bpe(d.activations)
        e.stream = e.residual_from = e.add(name, rec, (), out=out)

    def _norm(self, e: _Emit, op: ir.Norm, name: str) -> None:
        T, a = self.s.T_seq, self._act(op)
        rec = NormOp(op.kind, T * op.dim, op.dim, True, op.bias, self.s.train, a)
        e.stream = e.add(name, rec, (e.stream,), out=T * op.dim * bpe(a))

    _layernorm = _rmsnorm = _norm

    def _residual(self, e: _Emit, op: ir.Residual, name: str) -> None:
        T, a = self.s.T_seq, self._act(op)
        rec = BinaryOp((T, op.dim), (T, op.dim), "add", a, a, a)
        inputs = (e.stream, e.residual_from)
        e.stream = e.residual_from = e.add(name, rec, inputs, out=T * op.dim * bpe(a))

    def _rmsnorm_node(self, e: _Emit, name: str, rows: int, width: int, a: DType, x: str) -> str:
        """An RMSNorm inside a layer op (qk-norm, MLA's latent norms, Mamba's gated norm):
        `rows` vectors of `width` per token, a `width` scale."""
        s = self.s
        elems = s.T * rows * width
        rec = NormOp("rmsnorm", elems, width, True, False, s.train, a)
        return e.add(name, rec, (x,), out=elems * bpe(a))

    def _gemm_node(self, e, name, rec: GemmOp, inputs, w: DType) -> str:
        """A GEMM node: weights K·N per batch entry; output M·N. Activations the recipe
        quantizes pass through a Quantize node first (one per tensor, shared by the
        GEMMs that read it)."""
        if rec.a != rec.out:
            x = self._quantize(e, name, inputs[0], rec.B * rec.M, rec.K, rec.out, rec.a)
            inputs = (x, *inputs[1:])
        out = rec.B * rec.M * rec.N * bpe(rec.out)
        return e.add(name, rec, inputs, out=out)

    def _experts(self, e, name: str, rows: int, K: int, N: int, hit, d, x: str) -> str:
        """The experts' grouped GEMM over `rows` routed rows, under the op's recipe."""
        a, xq = d.activations, self.recipe.activations or d.activations
        if xq != a:
            x = self._quantize(e, name, x, rows, K, a, xq)
        scales = _scale_bytes(self.recipe, rows, N, K, experts=hit)
        rec = GroupedGemmOp(rows, K, N, hit, xq, d.weights, a, scale_bytes=scales)
        return e.add(name, rec, (x,), out=rows * N * bpe(a))

    def _quantize(self, e, name: str, x: str, rows: int, cols: int, src: DType, dst: DType):
        """The node that quantizes tensor `x` (rows × cols) to `dst` under the op's
        recipe, added by its first consumer `name`."""
        done = e.quantized.get((x, dst))
        if done is not None:
            return done
        scales = self.recipe.activation_scales
        block, written = 0, 0.0
        if scales is not None and scales.granularity != "tensor":  # computed as it goes
            block = cols if scales.granularity == "token" else scales.cols
            written = scales.count(rows, cols) * bpe(scales.dtype)
        rec = QuantizeOp(rows * cols, src, dst, written, block)
        node = e.add(f"{name}.quantize", rec, (x,), out=rows * cols * bpe(dst) + written)
        e.quantized[x, dst] = node
        return node

    def _attention(self, e: _Emit, op: ir.Attention, name: str) -> None:
        s, d = self.s, op.dtypes
        a, w, kv = d.activations, d.weights, d.kv_cache
        H, KV, hd = op.heads // self.tp, kv_heads(op.kv_heads, self.tp), op.head_dim
        x = self._enter(e, name, op.dim, a)
        if op.fused_qkv:
            qkv = _gemm(s.T, (H * (2 if op.gate else 1) + 2 * KV) * hd, op.dim, op.qkv_bias, d)
            q = k = v = self._gemm_node(e, f"{name}.qkv_proj", qkv, (x,), w)
        else:
            q_n = H * hd * (2 if op.gate else 1)  # the queries and their output gate
            q = self._gemm_node(
                e, f"{name}.q_proj", _gemm(s.T, q_n, op.dim, op.qkv_bias, d), (x,), w
            )
            k = self._gemm_node(
                e, f"{name}.k_proj", _gemm(s.T, KV * hd, op.dim, op.qkv_bias, d), (x,), w
            )
            v = self._gemm_node(
                e, f"{name}.v_proj", _gemm(s.T, KV * hd, op.dim, op.qkv_bias, d), (x,), w
            )
        if op.qk_norm:
            q = self._rmsnorm_node(e, f"{name}.q_norm", H, hd, a, q)
            k = self._rmsnorm_node(e, f"{name}.k_norm", KV, hd, a, k)
        if op.rope:
            q = k = e.add(
                f"{name}.rope", RopeOp(s.T, H + KV, hd, a), (q, k), out=s.T * (H + KV) * hd * bpe(a)
            )
        if op.qk_l2_norm:  # per head, no weight
            elems = s.T * (H + KV) * hd
            rec = NormOp("rmsnorm", elems, hd, False, False, s.train, a)
            q = k = e.add(f"{name}.qk_l2_norm", rec, (q, k), out=elems * bpe(a))
        cache_dtype, qa = a, a
        fp8 = self.recipe.attention and not s.train  # FP8 attention (FlashAttention-3)
        if not s.train and op.causal:  # bidirectional attention keeps no cache
            self._kv_write(e, name, op, (k, v))
            cache_dtype = kv if s.decode or fp8 else a
        if fp8:  # the queries too: QKᵀ and PV at the FP8 peak
            qa = DType.fp8_e4m3
            q = self._quantize(e, f"{name}.sdpa", q, s.T, H * hd, a, qa)
        if self.par.cp > 1:
            k = v = self._ring(e, name, 2 * KV * hd, a, (k, v))
        sdpa = SdpaOp(
            s.B,
            s.S,
            H,
            self._keys(op),
            KV,
            hd,
            hd,
            causal=op.causal and not s.decode,  # one new query sees every cached key
            window=op.window,
            act=qa,
            kv=cache_dtype,
            chunk=op.chunk if not s.decode else 0,
            flash_impl=op.kernel is ir.AttentionKernel.flash,
        )
        att = e.add(f"{name}.sdpa", sdpa, (q, k, v), out=s.B * s.S * H * hd * bpe(a))
        parts = (att, *self._chunk_attention(e, name, op, H, KV, (q, k, v), qa))
        if op.gate:  # sigmoid(gate) ∘ attention output (Qwen3-Next)
            gated = (s.T, H * hd)
            g = e.add(f"{name}.gate", UnaryOp(gated, "sigmoid", a, a), (q,),
                      out=s.T * H * hd * bpe(a))  # fmt: skip
            parts = (e.add(f"{name}.gate_mul", BinaryOp(gated, gated, "mul", a, a, a),
                           (*parts, g), out=s.T * H * hd * bpe(a)),)  # fmt: skip
        o = self._gemm_node(
            e, f"{name}.o_proj", _gemm(s.T, op.dim, H * hd, op.out_bias, d), parts, w
        )
        e.stream = self._exit(e, name, op.dim, a, o)

    def _chunk_attention(
        self, e: _Emit, name: str, op: ir.Attention, H: int, KV: int, qkv, qa: DType
    ):
        """A decode step's prefill chunk attends apart from the decode tokens: its whole
        prompts causally over their own tokens (after any cached prefix), and a partial
        prompt's tokens as a chunk from the middle of a prompt, which attends exactly
        the mean (query, key) pairs of all the chunks a prompt is cut into."""
        s, a, kv, hd = self.s, op.dtypes.activations, op.dtypes.kv_cache, op.head_dim
        if not s.chunk:
            return ()
        whole, rest = divmod(s.chunk, s.prompt)
        out = []
        for label, B, S, keys in (
            ("sdpa_prompts", whole, s.prompt, s.prefix + s.prompt),
            ("sdpa_chunk", 1 if rest else 0, rest, s.prefix + (s.prompt + rest) // 2),
        ):
            if B:
                rec = SdpaOp(B, S, H, keys, KV, hd, hd, causal=op.causal, window=op.window,
                             act=qa, kv=kv, chunk=op.chunk,
                             flash_impl=op.kernel is ir.AttentionKernel.flash)  # fmt: skip
                out.append(e.add(f"{name}.{label}", rec, qkv, out=B * S * H * hd * bpe(a)))
        return tuple(out)

    def _kv_write(self, e: _Emit, name: str, op: ir.Attention | ir.MLA, inputs) -> None:
        """The copy of this step's keys and values into the cache (memory.py sizes it)."""
        elements = self.s.T * cache_elements_per_token(op, self.tp)
        a, kv = op.dtypes.activations, op.dtypes.kv_cache
        rec = UnaryOp((elements,), "copy", a, kv)
        e.add(f"{name}.kv_cache_write", rec, inputs, out=elements * bpe(kv))

    def _mla(self, e: _Emit, op: ir.MLA, name: str) -> None:
        s, d = self.s, op.dtypes
        a, w, kv = d.activations, d.weights, d.kv_cache
        H, nope, rope, vd, r = (
            op.heads // self.tp,
            op.qk_nope_head_dim,
            op.qk_rope_head_dim,
            op.v_head_dim,
            op.kv_lora_rank,
        )
        x = self._enter(e, name, op.dim, a)
        if op.q_lora_rank:
            q = self._gemm_node(
                e, f"{name}.q_a_proj", _gemm(s.T, op.q_lora_rank, op.dim, False, d), (x,), w
            )
            q = self._rmsnorm_node(e, f"{name}.q_a_norm", 1, op.q_lora_rank, a, q)
            q = self._gemm_node(
                e,
                f"{name}.q_b_proj",
                _gemm(s.T, H * (nope + rope), op.q_lora_rank, False, d),
                (q,),
                w,
            )
        else:
            q = self._gemm_node(
                e, f"{name}.q_proj", _gemm(s.T, H * (nope + rope), op.dim, False, d), (x,), w
            )
        c = self._gemm_node(e, f"{name}.kv_a_proj", _gemm(s.T, r + rope, op.dim, False, d), (x,), w)
        c = self._rmsnorm_node(e, f"{name}.kv_a_norm", 1, r, a, c)
        q = e.add(
            f"{name}.rope", RopeOp(s.T, H + 1, rope, a), (q, c), out=s.T * (H + 1) * rope * bpe(a)
        )
        if not s.train and op.causal:
            self._kv_write(e, name, op, (c,))
        flash = op.kernel is ir.AttentionKernel.flash
        if s.decode:
            if MLA_DECODE_NOTE not in self.notes:
                self.notes.append(MLA_DECODE_NOTE)
            ql = self._gemm_node(
                e,
                f"{name}.q_absorb",
                _gemm(s.T, r, nope, False, d, batch=H, quantized=False),
                (q,),
                w,
            )
            sdpa = SdpaOp(s.B, 1, H, s.n_kv, 1, r + rope, r, causal=False, act=a, kv=kv,
                          flash_impl=flash)  # fmt: skip
            att = e.add(f"{name}.sdpa", sdpa, (ql, c), out=s.T * H * r * bpe(a))
            att = self._gemm_node(
                e,
                f"{name}.o_absorb",
                _gemm(s.T, vd, r, False, d, batch=H, quantized=False),
                (att,),
                w,
            )
        else:
            kvb = self._gemm_node(
                e, f"{name}.kv_b_proj", _gemm(s.T, H * (nope + vd), r, False, d), (c,), w
            )
            kvb = self._ring(e, name, H * (nope + vd) + rope, a, kvb)
            keys = self._keys(op)
            sdpa = SdpaOp(s.B, s.S, H, keys, H, nope + rope, vd, causal=op.causal, act=a, kv=a,
                          flash_impl=flash)  # fmt: skip
            att = e.add(f"{name}.sdpa", sdpa, (q, kvb), out=s.T * H * vd * bpe(a))
        o = self._gemm_node(e, f"{name}.o_proj", _gemm(s.T, op.dim, H * vd, False, d), (att,), w)
        e.stream = self._exit(e, name, op.dim, a, o)

    def _ffn(
        self,
        e: _Emit,
        name: str,
        dim: int,
        d_ff: int,
        act: ir.Activation,
        bias: bool,
        d: ir.DtypePolicy,
        x: str,
        fused: bool = False,
    ) -> str:
        s, a, w = self.s, d.activations, d.weights
        fn = ACT_FN[act]
        h_bytes = s.T * d_ff * bpe(a)
        if fused:  # one GEMM writes [gate | up]
            gu = _gemm(s.T, 2 * d_ff, dim, bias, d)
            gate = up = self._gemm_node(e, f"{name}.gate_up_proj", gu, (x,), w)
        elif act.gated:
            gate = self._gemm_node(e, f"{name}.gate_proj", _gemm(s.T, d_ff, dim, bias, d), (x,), w)
        if not fused:
            up = self._gemm_node(e, f"{name}.up_proj", _gemm(s.T, d_ff, dim, bias, d), (x,), w)
        if act.gated:
            g = e.add(f"{name}.act", UnaryOp((s.T, d_ff), fn, a, a), (gate,), out=h_bytes)
            h = e.add(
                f"{name}.gate_mul",
                BinaryOp((s.T, d_ff), (s.T, d_ff), "mul", a, a, a),
                (g, up),
                out=h_bytes,
            )
        else:
            h = e.add(f"{name}.act", UnaryOp((s.T, d_ff), fn, a, a), (up,), out=h_bytes)
        return self._gemm_node(e, f"{name}.down_proj", _gemm(s.T, dim, d_ff, bias, d), (h,), w)

    def _mlp(self, e: _Emit, op: ir.MLP, name: str) -> None:
        a = op.dtypes.activations
        x = self._enter(e, name, op.dim, a)
        width = op.d_ff // self.tp
        y = self._ffn(e, name, op.dim, width, op.act, op.bias, op.dtypes, x, op.fused_gate_up)
        e.stream = self._exit(e, name, op.dim, a, y)

    def _moe(self, e: _Emit, op: ir.MoE, name: str) -> None:
        s, d = self.s, op.dtypes
        a = d.activations
        T, E, k = s.T, op.experts, op.top_k
        ep, d_ff = self.par.ep, op.d_ff // self.tp
        x = self._enter(e, name, op.dim, a)
        # routers are kept in the activation dtype even when experts are quantized
        router = self._gemm_node(
            e, f"{name}.router", _gemm(T, E, op.dim, op.router_bias, d, a), (x,), a
        )
        routing = MoERoutingOp(
            T, E, k, op.router.value, a, op.groups, op.groups_kept, op.correction_bias
        )
        route = e.add(f"{name}.routing", routing, (router,), out=T * k * ROUTE_BYTES)
        rows = T * k
        disp = e.add(
            f"{name}.dispatch",
            MoECommOp(rows, op.dim, "dispatch", a),
            (x, route),
            out=rows * op.dim * bpe(a),
        )
        if ep > 1:  # each token copy travels to its expert's rank (balanced load)
            disp = self._collective(
                e, f"{name}.dispatch.all_to_all", "all_to_all", rows * op.dim, a, disp, "ep"
            )
        # the experts this rank holds that any token of the ep ranks reaches
        hit = expected_experts_hit(E, k, T * ep) / ep
        hit = int(hit) if float(hit).is_integer() else hit
        up_n = (2 if op.act.gated else 1) * d_ff
        gu = self._experts(e, f"{name}.experts.gate_up", rows, op.dim, up_n, hit, d, disp)
        h_bytes = rows * d_ff * bpe(a)
        h = e.add(
            f"{name}.experts.act",
            UnaryOp((rows, d_ff), ACT_FN[op.act], a, a),
            (gu,),
            out=h_bytes,
        )
        if op.act.gated:
            h = e.add(
                f"{name}.experts.gate_mul",
                BinaryOp((rows, d_ff), (rows, d_ff), "mul", a, a, a),
                (h,),
                out=h_bytes,
            )
        dn = self._experts(e, f"{name}.experts.down", rows, d_ff, op.dim, hit, d, h)
        if ep > 1:  # and back to the token's own rank
            dn = self._collective(
                e, f"{name}.combine.all_to_all", "all_to_all", rows * op.dim, a, dn, "ep"
            )
        out = e.add(
            f"{name}.combine",
            MoECommOp(rows, op.dim, "combine", a),
            (dn, route),
            out=T * op.dim * bpe(a),
        )
        if op.shared_experts:  # run as one MLP of the shared experts' summed width
            width = op.shared_experts * op.shared_d_ff // self.tp
            sh = self._ffn(e, f"{name}.shared", op.dim, width, op.act, op.bias, d, x)
            if op.shared_gate:  # sigmoid(x · w_gate) scales the shared experts' output
                g = self._gemm_node(e, f"{name}.shared_gate", _gemm(T, 1, op.dim, False, d, a),
                                 (x,), a)  # fmt: skip
                g = e.add(f"{name}.shared_gate.sigmoid", UnaryOp((T, 1), "sigmoid", a, a), (g,),
                          out=T * bpe(a))  # fmt: skip
                sh = e.add(f"{name}.shared_gate.mul",
                           BinaryOp((T, op.dim), (T, 1), "mul", a, a, a), (sh, g),
                           out=T * op.dim * bpe(a))  # fmt: skip
            out = e.add(
                f"{name}.shared_add",
                BinaryOp((T, op.dim), (T, op.dim), "add", a, a, a),
                (out, sh),
                out=T * op.dim * bpe(a),
            )
        e.stream = self._exit(e, name, op.dim, a, out)

    def _mamba2(self, e: _Emit, op: ir.Mamba2, name: str) -> None:
        s, d = self.s, op.dtypes
        a, w = d.activations, d.weights
        tp = self.tp
        H, P, G, N = op.heads // tp, op.head_dim, op.groups // tp, op.d_state
        di = op.d_inner // tp
        proj = 2 * di + 2 * G * N + H
        x = self._enter(e, name, op.dim, a)
        z = self._gemm_node(e, f"{name}.in_proj", _gemm(s.T, proj, op.dim, op.bias, d), (x,), w)
        if s.decode:
            rec: OpRecord = MambaStepOp(s.B, H, P, G, N, op.d_conv, a, SSM_STATE)
        else:
            rec = MambaSsdOp(s.B, s.S, H, P, G, N, op.chunk, op.d_conv, a, SSM_STATE)
        y = e.add(f"{name}.ssd", rec, (z,), out=s.T * di * bpe(a))
        y = self._rmsnorm_node(e, f"{name}.norm", 1, di, a, y)
        g = e.add(f"{name}.gate", UnaryOp((s.T, di), "silu", a, a), (z,), out=s.T * di * bpe(a))
        y = e.add(
            f"{name}.gate_mul",
            BinaryOp((s.T, di), (s.T, di), "mul", a, a, a),
            (y, g),
            out=s.T * di * bpe(a),
        )
        y = self._gemm_node(e, f"{name}.out_proj", _gemm(s.T, op.dim, di, op.bias, d), (y,), w)
        e.stream = self._exit(e, name, op.dim, a, y)

    def _gated_deltanet(self, e: _Emit, op: ir.GatedDeltaNet, name: str) -> None:
        s, d = self.s, op.dtypes
        a, w, tp = d.activations, d.weights, self.tp
        H, KH, dk, dv = op.v_heads // tp, op.k_heads // tp, op.head_k_dim, op.head_v_dim
        kd, vd = KH * dk, H * dv
        x = self._enter(e, name, op.dim, a)
        qkvz = _gemm(s.T, 2 * kd + 2 * vd, op.dim, False, d)
        z = self._gemm_node(e, f"{name}.in_proj_qkvz", qkvz, (x,), w)
        ba = self._gemm_node(e, f"{name}.in_proj_ba", _gemm(s.T, 2 * H, op.dim, False, d),
                             (x,), w)  # fmt: skip
        if s.decode:
            rec: OpRecord = GatedDeltaStepOp(s.B, H, KH, dk, dv, op.d_conv, a, SSM_STATE)
        else:
            rec = GatedDeltaNetOp(s.B, s.S, H, KH, dk, dv, op.chunk, op.d_conv, a, SSM_STATE)
        y = e.add(f"{name}.delta_rule", rec, (z, ba), out=s.T * vd * bpe(a))
        y = self._rmsnorm_node(e, f"{name}.norm", H, dv, a, y)  # gated by z
        g = e.add(f"{name}.gate", UnaryOp((s.T, vd), "silu", a, a), (z,), out=s.T * vd * bpe(a))
        y = e.add(f"{name}.gate_mul", BinaryOp((s.T, vd), (s.T, vd), "mul", a, a, a), (y, g),
                  out=s.T * vd * bpe(a))  # fmt: skip
        y = self._gemm_node(e, f"{name}.out_proj", _gemm(s.T, op.dim, vd, False, d), (y,), w)
        e.stream = self._exit(e, name, op.dim, a, y)

    def _lm_head(self, e: _Emit, op: ir.LMHead, name: str) -> None:
        s, d = self.s, op.dtypes
        a = d.activations
        rows = s.T if (s.train or s.logits_all) else s.B
        vocab = vocab_shard(op.vocab, self.tp)  # vocabulary-parallel
        x = self._enter(e, name, op.dim, a)
        rec = _gemm(rows, vocab, op.dim, op.bias, d)
        logits = self._gemm_node(e, name, rec, (x,), d.weights)
        if op.softcap:
            logits = e.add(
                f"{name}.softcap",
                UnaryOp((rows, vocab), "tanh", a, a),
                (logits,),
                out=rows * vocab * bpe(a),
            )
        if s.train:
            logits = e.add("loss", CrossEntropyOp(rows, vocab, a), (logits,), out=rows * LOSS_BYTES)
            if self.tp > 1:  # vocabulary-parallel cross-entropy: max, sum of exp, target
                logits = self._collective(
                    e, "loss.all_reduce", "all_reduce", 3 * rows, DType.fp32, logits
                )
        elif self.tp > 1:  # every rank's slice of the logits, gathered
            logits = self._collective(
                e, f"{name}.all_gather", "all_gather", rows * op.vocab, a, logits
            )
        e.stream = logits

    def _linear(self, e: _Emit, op: ir.Linear, name: str) -> None:
        """A projection to `out` features: the stream and the residual are that wide
        after it."""
        s, d = self.s, op.dtypes
        rec = _gemm(s.T, op.out, op.dim, op.bias, d)
        y = self._gemm_node(e, name, rec, (e.stream,), d.weights)
        if op.act is not None:
            a = d.activations
            act = UnaryOp((s.T, op.out), ACT_FN[op.act], a, a)
            y = e.add(f"{name}.act", act, (y,), out=s.T * op.out * bpe(a))
        e.stream = e.residual_from = y

    def _conv_stem(self, e: _Emit, op: ir.ConvStem, name: str) -> None:
        """Whisper's two convolutions (padding k//2, the second of stride 2) over twice
        the stream's length in mel frames, each with a GELU."""
        s, a = self.s, op.dtypes.activations
        x, channels, frames = "", op.mels, 2 * s.S
        for i, stride in ((1, 1), (2, 2)):
            conv = ConvOp(
                (s.B, channels, frames),
                (op.dim, channels, op.kernel),
                stride=(stride,),
                padding=(op.kernel // 2,),
                bias=True,
                dtype=a,
            )
            frames //= stride
            out = s.B * frames * op.dim * bpe(a)
            x = e.add(f"{name}.conv{i}", conv, (x,) if x else (), out=out)
            gelu = UnaryOp((s.B * frames, op.dim), "gelu", a, a)
            x = e.add(f"{name}.gelu{i}", gelu, (x,), out=out)
            channels = op.dim
        e.stream = e.residual_from = x

    def _rel_pos_bias(self, e: _Emit, op: ir.RelativePositionBias, name: str) -> None:
        """T5's bias table looked up once per (query, key) pair of a sequence (the same
        for every sequence of the batch) and read by every layer's attention."""
        s, d = self.s, op.dtypes
        pairs = s.S * s.n_kv
        rec = EmbeddingOp(pairs, op.buckets, op.heads, d.weights, d.activations)
        e.add(name, rec, (), out=pairs * op.heads * bpe(d.activations))

    def _cross_attention(self, e: _Emit, op: ir.CrossAttention, name: str) -> None:
        """Queries from this stream; keys and values from the source stream's output,
        projected once by prefill into the cross-attention cache that decode reads."""
        s, d = self.s, op.dtypes
        a, w, kv = d.activations, d.weights, d.kv_cache
        H, KV, hd = op.heads // self.tp, kv_heads(op.kv_heads, self.tp), op.head_dim
        L = dict(s.streams)[op.source]
        x = self._enter(e, name, op.dim, a)
        q = self._gemm_node(e, f"{name}.q_proj", _gemm(s.T, H * hd, op.dim, op.qkv_bias, d),
                            (x,), w)  # fmt: skip
        inputs: tuple[str, ...] = (q,)
        if not s.decode:
            src, rows = self.outputs[op.source], s.B * L
            k_rec = _gemm(rows, KV * hd, op.source_dim, op.k_bias, d)
            v_rec = _gemm(rows, KV * hd, op.source_dim, op.qkv_bias, d)
            k = self._gemm_node(e, f"{name}.k_proj", k_rec, (src,), w)
            v = self._gemm_node(e, f"{name}.v_proj", v_rec, (src,), w)
            inputs = (q, k, v)
            if not s.train:  # kept for every decode step
                elements = rows * cache_elements_per_token(op, self.tp)
                rec = UnaryOp((elements,), "copy", a, kv)
                e.add(f"{name}.kv_cache_write", rec, (k, v), out=elements * bpe(kv))
        sdpa = SdpaOp(s.B, s.S, H, L, KV, hd, hd, causal=False, act=a,
                      kv=kv if s.decode else a,
                      flash_impl=op.kernel is ir.AttentionKernel.flash)  # fmt: skip
        att = e.add(f"{name}.sdpa", sdpa, inputs, out=s.T * H * hd * bpe(a))
        o = self._gemm_node(e, f"{name}.o_proj", _gemm(s.T, op.dim, H * hd, op.out_bias, d),
                            (att,), w)  # fmt: skip
        e.stream = self._exit(e, name, op.dim, a, o)

    def _keep(self, e: _Emit, op: ir.Keep, name: str) -> None:
        """A slice of the stream's tokens: no work, fewer tokens from here on."""
        self.s = replace(self.s, S=op.tokens, n_kv=op.tokens)

    def _pool(self, e: _Emit, op: ir.Pool, name: str) -> None:
        """The mean of each kernel × kernel square of the token grid."""
        s, a, k = self.s, op.dtypes.activations, op.kernel
        side = math.isqrt(s.S) // k
        rec = ReduceOp((s.B, side, k, side, k, op.dim), (2, 4), "mean", a, a)
        out = s.B * side * side * op.dim * bpe(a)
        e.stream = e.residual_from = e.add(name, rec, (e.stream,), out=out)
        self.s = replace(s, S=side * side, n_kv=side * side)

    def _pixel_shuffle(self, e: _Emit, op: ir.PixelShuffle, name: str) -> None:
        """Neighbouring tokens' features moved side by side: a copy of the stream."""
        s, a, k = self.s, op.dtypes.activations, op.factor
        rec = UnaryOp((s.T, op.dim), "copy", a, a)
        e.stream = e.residual_from = e.add(name, rec, (e.stream,), out=s.T * op.dim * bpe(a))
        self.s = replace(s, S=s.S // (k * k), n_kv=s.S // (k * k))

    def _mtp_proj(self, e: _Emit, op: ir.MTPProjection, name: str) -> None:
        """The next token's embedding and the main model's last hidden state, each
        RMS-normalized, concatenated, and projected from 2·dim to dim."""
        s, d = self.s, op.dtypes
        a, T = d.activations, s.T
        en = self._rmsnorm_node(e, f"{name}.enorm", 1, op.dim, a, e.stream)
        hn = self._rmsnorm_node(e, f"{name}.hnorm", 1, op.dim, a, self.hidden)
        cat = e.add(f"{name}.concat", UnaryOp((T, 2 * op.dim), "copy", a, a), (en, hn),
                    out=T * 2 * op.dim * bpe(a))  # fmt: skip
        rec = _gemm(T, op.dim, 2 * op.dim, False, d)
        e.stream = e.residual_from = self._gemm_node(e, f"{name}.eh_proj", rec, (cat,), d.weights)

    def _pooler(self, e: _Emit, op: ir.Pooler, name: str) -> None:
        s, d = self.s, op.dtypes
        rec = _gemm(s.B, op.dim, op.dim, op.bias, d)  # on each sequence's class token
        dense = self._gemm_node(e, f"{name}.dense", rec, (e.stream,), d.weights)
        tanh = UnaryOp((s.B, op.dim), "tanh", d.activations, d.activations)
        e.stream = e.add(f"{name}.tanh", tanh, (dense,), out=s.B * op.dim * bpe(d.activations))

    def _classifier(self, e: _Emit, op: ir.Classifier, name: str) -> None:
        s, d = self.s, op.dtypes
        rec = _gemm(s.B, op.classes, op.dim, op.bias, d)  # on each image's class token
        out = self._gemm_node(e, name, rec, (e.stream,), d.weights)
        if s.train:
            loss = CrossEntropyOp(s.B, op.classes, d.activations)
            out = e.add("loss", loss, (out,), out=s.B * LOSS_BYTES)
        e.stream = out


class _Stack(Record, frozen=True):
    """One layer group of the top level: `count` layers of `body`, the group's layers
    interleaving with its siblings' (stride k for a repeat of k block calls)."""

    block: str
    count: int
    stride: int
    offset: int
    body: tuple[ir.Statement, ...]


def _layer_plan(body: tuple[ir.Statement, ...]) -> list[ir.Op | ir.Stream | _Stack]:
    """Split the top level into model-level ops, other streams and layer groups."""
    plan: list[ir.Op | ir.Stream | _Stack] = []
    for node in body:
        if isinstance(node, ir.Repeat):
            blocks = [b for b in node.body if isinstance(b, ir.Block)]
            if len(blocks) == len(node.body):
                k = len(blocks)
                plan.extend(_Stack(b.name, node.count, k, j, b.body) for j, b in enumerate(blocks))
            else:
                plan.append(_Stack("layer", node.count, 1, 0, node.body))
        elif isinstance(node, ir.Block):
            plan.append(_Stack(node.name, 1, 1, 0, node.body))
        else:
            plan.append(node)
    return plan


def _placed(
    plan: list[ir.Op | ir.Stream | _Stack],
) -> list[tuple[ir.Op | ir.Stream | _Stack, tuple[int, ...]]]:
    """Each plan item with its layer indices: a stack's layers, or for a model-level op
    the index of the next layer (so an op before the layers sorts before them)."""
    placed: list[tuple[ir.Op | ir.Stream | _Stack, tuple[int, ...]]] = []
    layer = pending_end = 0
    for item in plan:
        if not isinstance(item, _Stack):
            placed.append((item, (max(layer, pending_end),)))
            continue
        first = layer + item.offset
        placed.append((item, tuple(first + i * item.stride for i in range(item.count))))
        pending_end = max(pending_end, first + (item.count - 1) * item.stride + 1)
        if item.offset == item.stride - 1:
            layer = pending_end
    return placed


def _last_stage(spec: ir.Spec, plan, pp: int) -> range:
    """The layers of the last pipeline stage (ceil(L/pp) of them; the report is this
    device's: it holds the head, the slowest stage when stages are even)."""
    layers = sum(len(ls) for item, ls in plan if isinstance(item, _Stack))
    if pp > max(layers, 1):
        raise SpecError(
            f"--pp {pp} is more pipeline stages than the {layers} layers of `{spec.name}`",
            filename="modelcost",
            hint=f"use at most {layers} stages",
        )
    size = -(-layers // pp)
    return range(layers - size, layers) if pp > 1 else range(0, max(layers, 1))


class _Stage(Record, frozen=True):
    """What this device's pipeline stage runs: each model-level op or layer group it
    holds, with its layers here and its ops (with multiplicities), and everything it
    holds, for its memory. The same for every batch and context."""

    items: tuple[tuple[ir.Op | _Stack, tuple[int, ...], tuple[tuple[ir.Op, int], ...]], ...]
    held: Held
    model_scopes: Counter  # every model-level op's scope, on any stage: names stay stable


@per_object
def _stage(spec: ir.Spec, pp: int, train: bool) -> _Stage:
    plan = _placed(_layer_plan(spec.body))
    stage = _last_stage(spec, plan, pp)
    items: list = []
    held: list[tuple[ir.Op, int]] = []
    for item, layers in plan:
        if isinstance(item, ir.Stream):  # an auxiliary module is loaded to train it
            if (layers and layers[0] < stage.start) or (item.auxiliary and not train):
                continue
            items.append((item, layers, ()))
            held.extend(walk(item.body))
            continue
        if not isinstance(item, _Stack):
            if layers and layers[0] < stage.start:  # before the layers: the first stage's
                continue
            items.append((item, layers, ((item, 1),)))
            held.append((item, 1))
            continue
        layers = tuple(i for i in layers if i in stage)
        if layers:
            ops = tuple(walk(item.body))
            items.append((item, layers, ops))
            held.extend((op, times * len(layers)) for op, times in ops)
    scopes = Counter(item.scope for item, _ in plan if not isinstance(item, _Stack | ir.Stream))
    return _Stage(tuple(items), Held(tuple(held)), scopes)


@per_object
def _stream_items(stream: ir.Stream) -> tuple:
    """A stream's model-level ops and layer groups, as a stage's items (one stage)."""
    items: list = []
    for item, layers in _placed(_layer_plan(stream.body)):
        ops = tuple(walk(item.body)) if isinstance(item, _Stack) else ((item, 1),)
        items.append((item, layers, ops))
    return tuple(items)


@per_object
def _input_facts(spec: ir.Spec) -> tuple[ir.PatchEmbed | None, ir.PositionEmbedding | None, bool]:
    """(the patch embedding, the learned positions, whether any layer decodes) of the
    main stream."""
    ops = [op for op, _ in walk(spec.body, streams=False)]
    patch = next((op for op in ops if isinstance(op, ir.PatchEmbed)), None)
    positions = next((op for op in ops if isinstance(op, ir.PositionEmbedding)), None)
    return patch, positions, any(op.decodes for op in ops)


def decodes(spec: ir.Spec) -> bool:
    """Whether the main stream has a decode step (causal attention or an SSM)."""
    return _input_facts(spec)[2]


def _workload_shape(spec: ir.Spec, w: Workload) -> tuple[Shape, list[str]]:
    notes: list[str] = []
    patch, positions, decodes = _input_facts(spec)
    if w.phase is Phase.decode and not decodes:
        raise SpecError(
            f"decode needs a causal decoder, and `{spec.name}` has no causal attention or SSM",
            filename="modelcost",
            hint="use --phase prefill (a forward pass) or train",
        )
    limit = positions.positions if positions is not None else None
    S = w.seq
    if S is None:  # decode reads no sequence length: its note would say nothing true
        said = [] if w.phase is Phase.decode else notes
        S = _default_length("sequence length", DEFAULT_SEQ, limit, spec, said)
    if patch is not None:
        image_tokens = (patch.image // patch.patch) ** 2 + (1 if patch.cls_token else 0)
        if w.seq is not None and w.seq != image_tokens:
            raise SpecError(
                f"`{spec.name}` takes its sequence length from its image: {image_tokens} "
                f"tokens, not seq {w.seq}",
                filename="modelcost",
                hint="leave --seq out for a model with a patch embedding",
            )
        S = image_tokens
        notes.append(
            f"sequence length {S} is set by the image: ({patch.image}/{patch.patch})² patches"
            + (" + 1 class token" if patch.cls_token else "")
        )
    if w.context is not None:
        context = w.context
    elif w.phase is Phase.decode:
        context = _default_length("context", DEFAULT_CONTEXT, limit, spec, notes)
    else:
        context = DEFAULT_CONTEXT  # read by decode only
    length = context if w.phase is Phase.decode else S
    if positions is not None and length > positions.positions:
        what = "context" if w.phase is Phase.decode else "sequence length"
        raise SpecError(
            f"{what} {length} exceeds the {positions.positions} learned positions of `{spec.name}`",
            filename="modelcost",
            hint=f"use at most {positions.positions}",
        )
    par = w.parallel
    check_layout(spec, par, w.batch)
    B = w.batch // par.dp // par.microbatches  # sequences per microbatch of a replica
    if par.cp > 1:
        if w.phase is Phase.decode:
            raise SpecError(
                "context parallelism splits a sequence's tokens: decode has one per sequence",
                filename="modelcost",
                hint="use --tp or --dp for decode",
            )
        if S % par.cp:
            raise SpecError(
                f"--cp {par.cp} does not divide the sequence length {S}",
                filename="modelcost",
                hint=f"use a sequence length that is a multiple of {par.cp}",
            )
    prompt = _serving_extras(spec, w)
    streams, joins = _stream_lengths(spec, w)
    S += sum(n for _, n in joins)  # image tokens join the text
    context += sum(n for _, n in joins)
    tokens = B * (1 if w.phase is Phase.decode else S // par.cp) + w.chunk
    if par.sp and tokens % par.tp:
        raise SpecError(
            f"sequence parallelism splits {tokens} tokens over tp = {par.tp} ranks unevenly",
            filename="modelcost",
            hint=f"use a batch and length whose tokens per replica divide by {par.tp}",
        )
    if w.phase is Phase.decode:
        shape = Shape(w.phase, B, 1, context, False, par, w.chunk, prompt, w.prefix,
                      streams, joins)  # fmt: skip
        return shape, notes
    shape = Shape(w.phase, B, S // par.cp, S + w.prefix, settled(w).logits == "all", par,
                  prefix=w.prefix, streams=streams, joins=joins)  # fmt: skip
    return shape, notes


def _default_length(
    what: str, default: int, limit: int | None, spec: ir.Spec, notes: list[str]
) -> int:
    """A length the user left out: the default, or the model's learned positions where
    it has fewer (GPT-2's 1,024, BERT's 512), said in a note."""
    if limit is None or default <= limit:
        return default
    notes.append(f"{what} {limit}: the default {default} capped at the {limit} learned "
                 f"positions of `{spec.name}`")  # fmt: skip
    return limit


def _stream_lengths(
    spec: ir.Spec, w: Workload
) -> tuple[tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]]:
    """Each encoder or tower stream's length for this workload (the spec's unless the
    workload names it), and the tokens each joining stream adds to a main sequence.
    Layouts and engine features not modelled across streams are refused here."""
    streams = streams_of(spec)
    own = {st.name: st for st in streams if not st.auxiliary}
    for name, _ in w.streams:
        if name not in own:
            aux = any(st.name == name for st in streams)
            raise SpecError(
                f"`{spec.name}` has no stream `{name}` with a length of its own"
                if aux or own else f"`{spec.name}` has one token stream: --stream does not apply",
                filename="modelcost",
                hint=("an auxiliary stream runs over the main sequence" if aux else
                      did_you_mean(name, list(own)) or
                      (f"streams: {', '.join(own)}" if own else None)),
            )  # fmt: skip
    if not own:
        return (), ()
    par = w.parallel
    refused = [what for what, on in (
        ("--pp", par.pp > 1), ("--cp", par.cp > 1), ("--sp", par.sp),
        ("--recompute full", par.recompute == "full"), ("--chunk", bool(w.chunk)),
        ("--prefix", bool(w.prefix)),
    ) if on]  # fmt: skip
    if refused:
        raise SpecError(
            f"{', '.join(refused)} with several token streams (`{spec.name}` has "
            f"{', '.join(own)}) is not modelled",
            filename="modelcost",
            hint="use --tp, --dp and --ep with encoder-decoder and multimodal models",
        )
    given = dict(w.streams)
    lengths: list[tuple[str, int]] = []
    for st in own.values():
        n = given.get(st.name, st.length)
        fixed = _fixed_length(st)
        if fixed and n != st.length:
            raise SpecError(
                f"stream `{st.name}` of `{spec.name}` takes its length from its {fixed}: "
                f"{st.length} tokens, not {n}",
                filename="modelcost",
                hint=f"leave --stream {st.name} out",
            )
        positions = next((op.positions for op, _ in walk(st.body)
                          if isinstance(op, ir.PositionEmbedding)), None)  # fmt: skip
        if positions is not None and n > positions:
            raise SpecError(
                f"stream `{st.name}` of `{spec.name}` has {positions} learned positions, "
                f"fewer than its length {n}",
                filename="modelcost",
                hint=f"--stream {st.name}={positions} at most",
            )
        if n < st.joins:
            raise SpecError(
                f"stream `{st.name}` joins {st.joins} tokens: its length {n} is shorter",
                filename="modelcost",
                hint=f"--stream {st.name}={st.joins} at least",
            )
        lengths.append((st.name, n))
    joins = tuple((st.name, st.joins) for st in own.values() if st.joins)
    return tuple(lengths), joins


@per_object
def _fixed_length(stream: ir.Stream) -> str:
    """What fixes a stream's length, if anything: an image (a patch embedding) or
    learned positions as many as its length (Whisper's 1,500 audio positions)."""
    for op, _ in walk(stream.body):
        if isinstance(op, ir.PatchEmbed):
            return "image"
        if isinstance(op, ir.ConvStem):
            return "audio window (its convolutions and positions)"
        if isinstance(op, ir.TOKEN_OPS):
            return "token grid (its keep, pool or pixel shuffle)"
    return ""


def _serving_extras(spec: ir.Spec, w: Workload) -> int:
    """Check a workload's prefix-cache hit and prefill chunk against the phase and the
    layers; the chunk's prompt length (its new tokens) when there is one."""
    if w.chunk and w.phase is not Phase.decode:
        raise SpecError(
            "a prefill chunk rides on a decode step: use --phase decode with --chunk",
            filename="modelcost",
            hint="for a plain prefill of the prompt use --phase prefill --seq",
        )
    if w.prefix and w.phase is Phase.train:
        raise SpecError("training has no prefix cache", filename="modelcost",
                        hint="--prefix is for prefill (and a decode step's chunk)")  # fmt: skip
    if w.prefix and w.phase is Phase.decode and not w.chunk:
        raise SpecError(
            "--prefix counts cached prompt tokens before a prefill: decode's cache is --context",
            filename="modelcost",
            hint="give --chunk too, or use --phase prefill",
        )
    if w.prompt and not w.chunk:
        raise SpecError("--prompt is the length of a chunk's prompts: give --chunk",
                        filename="modelcost")  # fmt: skip
    if (w.prefix or w.chunk) and w.parallel.cp > 1:
        raise SpecError(
            "context parallelism with a prefix cache or a prefill chunk is not modelled",
            filename="modelcost",
            hint="drop --cp",
        )
    if w.prefix or w.chunk:
        # a latent or recurrent layer would take prefix and chunk otherwise than
        # grouped-query attention does (MLA up-projects cached latents; an SSM carries
        # its state through a chunk): say so rather than cost them as attention
        other = next((op for op, _ in walk(spec.body) if isinstance(op, ir.MLA | ir.Mamba2)), None)
        if other is not None:
            what = "a prefill chunk" if w.chunk else "a prefix cache"
            raise SpecError(
                f"{what} is modelled for attention layers; `{spec.name}` has a "
                f"{type(other).__name__} layer",
                filename="modelcost",
                hint="leave out --chunk and --prefix for this model",
            )
    return w.prompt or w.chunk


def _check_size(spec: ir.Spec, nodes: int) -> None:
    """Costing, rooflining and rendering take time per distinct op: bound them."""
    if nodes > MAX_NODES:
        raise SpecError(
            f"`{spec.name}` lowers to more than {MAX_NODES:,} distinct ops",
            filename="modelcost",
            hint="use `repeat` for identical layers: a repeated layer is lowered once",
        )


def _step_nodes(spec: ir.Spec, shape: Shape, facts: ModelFacts) -> list[Node]:
    """Training's once-per-step work on one device: the data-parallel gradient sync
    (ZeRO-0 all-reduce; ZeRO-1/2 reduce-scatter, then all-gather of the updated weights;
    ZeRO-3 also gathers the weights for forward and backward) and the AdamW step on the
    parameters this device updates (Rajbhandari et al. 2020)."""
    par, w = shape.par, spec.dtypes.weights
    g = spec.dtypes.activations  # gradients are reduced in the activation dtype
    nodes: list[Node] = []
    # dense parameters are replicated over dp ranks; experts over dp/ep of them
    for what, elements, group, stride in (
        ("grads", facts.device_dense, par.weight_copies, par.copies_stride),
        ("expert_grads", facts.device_experts, par.expert_copies, par.expert_copies_stride),
    ):
        if group == 1 or not elements:
            continue
        steps: list[tuple[str, CollectiveKind, DType]] = [("all_reduce", "all_reduce", g)]
        if par.zero:
            steps = [("reduce_scatter", "reduce_scatter", g)]
            steps.append(("params.all_gather", "all_gather", w))
            if par.zero == 3:
                steps.append(("params.all_gather.backward", "all_gather", w))
        for name, kind, dtype in steps:
            rec = CollectiveOp(kind, elements, group, dtype, stride)
            nodes.append(Node(f"{what}.{name}", "model", 1, rec, (), 0, step=True))
    updated = facts.device_dense // (par.weight_copies if par.zero else 1)
    updated += facts.device_experts // (par.expert_copies if par.zero else 1)
    adam = AdamStepOp(updated, weight=w, grad=w)
    nodes.append(Node("optimizer", "model", 1, adam, (), 0, step=True))
    return nodes


def _lower_items(
    lowerer: _Lowerer,
    items,
    prefix: str,
    group: str,
    scopes: Counter,
    stream: str,
    residual: str,
    nodes: list[Node],
    groups: list[Group],
    spec: ir.Spec,
) -> tuple[str, str]:
    """Lower one stream's model-level ops and layer groups in order; returns the nodes
    carrying its stream and residual at the end."""
    model_emit = _Emit(prefix, group, 1, stream, residual, totals=scopes)
    for item, layers, ops in items:
        if isinstance(item, ir.Stream):
            _lower_stream(lowerer, item, nodes, groups, spec, stream)
            continue
        if not isinstance(item, _Stack):
            model_emit.stream, model_emit.residual_from = stream, residual
            start = len(model_emit.nodes)
            lowerer.lower(model_emit, item, 1)
            nodes.extend(model_emit.nodes[start:])
            _check_size(spec, len(nodes))
            stream, residual = model_emit.stream, model_emit.residual_from
            continue
        label = f"{prefix}layers.{layers[0]}"
        totals = Counter(op.scope for op, _ in ops)
        e = _Emit(f"{label}.", label, len(layers), stream, residual, totals=totals)
        for op, times in ops:
            lowerer.lower(e, op, times)
            _check_size(spec, len(nodes) + len(e.nodes))
        nodes.extend(e.nodes)
        groups.append(Group(label, item.block, layers, len(layers)))
        stream, residual = e.stream, e.residual_from
        lowerer.hidden = stream  # the last layer's output (what multi-token prediction reads)
    return stream, residual


def _lower_stream(
    lowerer: _Lowerer,
    st: ir.Stream,
    nodes: list[Node],
    groups: list[Group],
    spec: ir.Spec,
    main: str,
) -> None:
    """An encoder or tower over its own tokens (prefill and training: decode reuses
    what it left), or an auxiliary module over the main stream's tokens (training)."""
    shape = lowerer.s
    if shape.decode and not st.auxiliary:
        return
    sub = shape
    if not st.auxiliary:
        L = dict(shape.streams)[st.name]
        sub = Shape(shape.phase, shape.B, L, L, False, shape.par)
    groups.append(Group(st.name, "stream", (), 1))
    scopes = Counter(item.scope for item, _, _ in _stream_items(st) if not isinstance(item, _Stack))
    lowerer.s = sub
    hidden = lowerer.hidden
    start = main if st.auxiliary else ""  # a module reads the main stream; a tower, nothing
    try:
        out, _ = _lower_items(lowerer, _stream_items(st), f"{st.name}.", st.name, scopes,
                              start, start, nodes, groups, spec)  # fmt: skip
    finally:
        lowerer.s, lowerer.hidden = shape, hidden
    lowerer.outputs[st.name] = out


def lower(spec: ir.Spec, workload: Workload) -> OpGraph:
    """Lower a resolved spec for one workload into an op graph."""
    shape, notes = _workload_shape(spec, workload)
    lowerer = _Lowerer(spec, shape)
    nodes: list[Node] = []
    groups: list[Group] = []
    stream, residual = "", ""
    st = _stage(spec, shape.par.pp, shape.train)
    if shape.par.pp > 1:  # the previous stage's activations arrive (gradients go back)
        a = spec.dtypes.activations
        rec = CollectiveOp("p2p", shape.T_seq * residual_width(spec), 2, a, shape.par.pp_stride)
        stream = residual = "pipeline.recv"
        nodes.append(Node(stream, "model", 1, rec, (), shape.T_seq * residual_width(spec) * bpe(a)))
    _lower_items(lowerer, st.items, "", "model", st.model_scopes, stream, residual, nodes,
                 groups, spec)  # fmt: skip
    m = shape.par.microbatches
    if m > 1:  # every op of the step runs once per microbatch
        nodes = [replace(n, count=n.count * m) for n in nodes]
    facts = model_facts(spec, shape, st.held)
    if shape.train:
        nodes.extend(_step_nodes(spec, shape, facts))
    model_nodes = [n for n in nodes if n.group == "model"]
    if model_nodes:
        groups.insert(0, Group("model", "model", (), 1))
    used = {n.group for n in nodes}
    groups = [g for g in groups if g.name in used]
    return OpGraph(facts, workload, shape, tuple(nodes), tuple(groups), (*notes, *lowerer.notes))
