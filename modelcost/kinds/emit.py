"""The toolkit a layer kind's lowering writes its nodes with: `Emit` collects one
scope's nodes under stable names, `Lowerer` carries the workload's shape and layout and
the helpers every kind shares (a linear layer's GEMM under its precision recipe, the
tensor-parallel collectives around a layer, norms inside a layer, an MLP).
"""

from __future__ import annotations

from collections import Counter
from typing import Literal

from msgspec import Struct, field

import modelcost.language.spec as ir
from modelcost.base.dtypes import DType
from modelcost.base.record import replace
from modelcost.ir.graph import Node, Shape
from modelcost.language.recipes import NO_RECIPE, RECIPES, Recipe
from modelcost.perfmodel import (
    BinaryOp,
    CollectiveOp,
    GemmOp,
    GroupedGemmOp,
    NormOp,
    OpRecord,
    QuantizeOp,
    RingMergeOp,
    UnaryOp,
    bpe,
)
from modelcost.perfmodel.base import Number
from modelcost.perfmodel.collectives import CollectiveKind, Fanout

ACT_FN = {
    ir.Activation.swiglu: "silu",
    ir.Activation.silu: "silu",
    ir.Activation.geglu: "gelu_tanh",
    ir.Activation.gelu: "gelu",
    ir.Activation.gelu_tanh: "gelu_tanh",
    ir.Activation.quick_gelu: "quick_gelu",
    ir.Activation.relu: "relu",
}


class Emit(Struct):
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
    casts: dict[str, str] = field(default_factory=dict)  # a narrow tensor → its Quantize node

    def add_grads(self, cast: str, elements: int) -> None:
        """Count `elements` more output gradients the backward of Quantize node `cast`
        casts (QuantizeOp.grads): a GEMM reading its tensor, or a correction to one."""
        for i, n in enumerate(self.nodes):
            if n.name == cast:
                op = n.op
                assert isinstance(op, QuantizeOp)  # casts maps to Quantize nodes only
                self.nodes[i] = replace(n, op=replace(op, grads=op.grads + elements))
                return

    def scope(self, base: str) -> str:
        """`attn`, or `norm.0`, `norm.1`, ... when a kind occurs more than once."""
        if self.totals[base] <= 1:
            return base
        name = f"{base}.{self.used[base]}"
        self.used[base] += 1
        return name

    def add(
        self,
        name: str,
        op: OpRecord,
        inputs: tuple[str, ...],
        *,
        out: float = 0.0,
        step: bool = False,
        beside: bool = False,
    ) -> str:
        full = f"{self.prefix}{name}" if self.prefix else name
        self.nodes.append(Node(full, self.group, self.count, op, inputs, out, step, beside))
        return full


def gemm(
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
    scales = batch * scale_bytes(recipe, M, N, K)
    return GemmOp(M, N, K, bias, batch, a=x, b=w, out=a, bias_dtype=a, scale_bytes=scales)


def scale_bytes(recipe: Recipe, M: int, N: int, K: int, experts: Number = 1) -> Number:
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


class Lowerer:
    """One workload's lowering state (its shape `s`, layout `par`, the op's precision
    `recipe`, the streams lowered so far) and the helpers the kinds' lowerings share."""

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

    def collective(
        self,
        e: Emit,
        name: str,
        kind: CollectiveKind,
        elements: int,
        a: DType,
        x: str | tuple[str, ...],
        over: Literal["tp", "cp", "ep", "gather"] = "tp",
        fanout: Fanout | None = None,
        beside: bool = False,
    ) -> str:
        """A collective over this rank's tp group (adjacent ranks), its context-parallel
        group (tp apart), its expert-parallel group, or (folded experts) the dp replicas
        its expert group gathers tokens from (tp apart); `fanout`: a MoE token exchange's
        routing (each row once to each rank holding its experts); `beside`: Megatron-Core
        runs it beside compute (`Node.beside`)."""
        par = self.par
        groups = {"tp": (par.tp, 1), "cp": (par.cp, par.tp), "ep": (par.ep, par.ep_stride),
                  "gather": (par.expert_gather, par.tp)}  # fmt: skip
        group, stride = groups[over]
        rec = CollectiveOp(kind, elements, group, a, stride, fanout)
        out = elements * bpe(a) / (group if kind == "reduce_scatter" else 1)
        return e.add(name, rec, x if isinstance(x, tuple) else (x,), out=out, beside=beside)

    def ring(self, e: Emit, name: str, per_token: int, a: DType, x) -> str:
        """Ring attention's key/value exchange: every rank receives every other rank's
        chunk, an all-gather's volume (its gradients go back as a reduce-scatter); sent
        beside each ring step's attention (Transformer Engine's p2p context parallelism,
        AttnFuncWithCPAndKVP2P: each step's send issued before its kernel)."""
        if self.par.cp == 1:
            return x if isinstance(x, str) else x[0]
        elements = self.s.B * self.s.n_kv * per_token
        return self.collective(e, f"{name}.kv_ring", "all_gather", elements, a, x, "cp",
                               beside=True)  # fmt: skip

    def ring_merge(
        self, e: Emit, name: str, q: int, o: int, kv: int, causal: bool, a: DType, x: str
    ) -> None:
        """The elementwise work around ring attention's steps, as Transformer Engine's
        p2p context parallelism runs it (RingMergeOp): per token `q` query, `o` output
        and `kv` key-and-value elements of this rank's chunk. A side node off the
        attention `x`, which its output stays (the corrections write the kept O).
        Context parallelism refuses decode, so a ring runs over prompts only."""
        if self.par.cp == 1:
            return
        t = self.s.B * self.s.S
        e.add(f"{name}.ring_merge", RingMergeOp(t * q, t * o, t * kv, self.par.cp, causal, a),
              (x,))  # fmt: skip

    def enter(self, e: Emit, name: str, dim: int, a: DType, beside: bool = True) -> str:
        """The layer's input on every tp rank: gathered from 1/tp of the tokens under
        sequence parallelism (else already replicated). A recipe that quantizes the
        layer's GEMM inputs quantizes the shard and gathers it narrow, as Transformer
        Engine's FP8 all-gather does: the backward keeps the narrow shard. Under TP
        communication overlap the gather runs beside its GEMM (Transformer Engine's
        userbuffers ring exchange; Megatron-Bridge's recipes set tp_comm_overlap with
        sequence parallelism); `beside` off where the layer is no Transformer Engine
        module (Megatron's output layer), whose gather userbuffers do not overlap."""
        if not self.par.sp:
            return e.stream
        narrow = self.recipe.activations
        if narrow is None or narrow == a:
            return self.collective(e, f"{name}.all_gather", "all_gather", self.s.T * dim, a,
                                   e.stream, beside=beside)  # fmt: skip
        shard = self.quantize(e, name, e.stream, -(-self.s.T // self.tp), dim, a, narrow)
        x = self.collective(e, f"{name}.all_gather", "all_gather", self.s.T * dim, narrow, shard,
                            beside=beside)  # fmt: skip
        e.quantized[x, narrow] = x  # the GEMMs read it as it is
        e.casts[x] = shard
        return x

    def exit(self, e: Emit, name: str, dim: int, a: DType, x: str) -> str:
        """The row-parallel output's partial sums combined: an all-reduce, or a
        reduce-scatter to 1/tp of the tokens under sequence parallelism, which TP
        communication overlap runs beside the GEMM (userbuffers' pipelined GEMM +
        reduce-scatter); an all-reduce it does not overlap (Megatron-Bridge turns the
        overlap off without sequence parallelism)."""
        if self.tp == 1:
            return x
        if self.par.sp and self.s.train:  # its output gradient arrives gathered: cast as
            self._shard_grads(e, x)  # the shard, then gathered narrow (TE's FP8 dgrad AG)
        kind: CollectiveKind = "reduce_scatter" if self.par.sp else "all_reduce"
        return self.collective(e, f"{name}.{kind}", kind, self.s.T * dim, a, x,
                               beside=self.par.sp)  # fmt: skip

    def _shard_grads(self, e: Emit, x: str) -> None:
        """A row-parallel GEMM `x` whose output is reduce-scattered: Transformer Engine
        casts its output gradient's 1/tp shard before gathering it in FP8 (the proj and
        fc2 dgrad all-gathers with FP8 buffers), not the gathered whole."""
        node = next((n for n in e.nodes if n.name == x), None)
        if node is None or not isinstance(node.op, GemmOp) or not node.inputs:
            return
        cast = e.casts.get(node.inputs[0])
        if cast is None:
            return
        rec = node.op
        whole = rec.B * rec.M * rec.N
        e.add_grads(cast, -(whole - rec.B * -(-rec.M // self.tp) * rec.N))

    def act(self, op: ir.Op | ir.Norm) -> DType:
        return op.dtypes.activations

    def rmsnorm_node(self, e: Emit, name: str, rows: int, width: int, a: DType, x: str) -> str:
        """An RMSNorm inside a layer op (qk-norm, MLA's latent norms, Mamba's gated norm):
        `rows` vectors of `width` per token, a `width` scale."""
        s = self.s
        elems = s.T * rows * width
        rec = NormOp("rmsnorm", elems, width, True, False, s.train, a)
        return e.add(name, rec, (x,), out=elems * bpe(a))

    def gemm_node(self, e, name, rec: GemmOp, inputs) -> str:
        """A GEMM node: weights K·N per batch entry; output M·N. Activations the recipe
        quantizes pass through a Quantize node first (one per tensor, shared by the
        GEMMs that read it)."""
        if rec.a != rec.out:
            x = self.quantize(e, name, inputs[0], rec.B * rec.M, rec.K, rec.out, rec.a)
            inputs = (x, *inputs[1:])
            if self.s.train:  # its output gradient is cast for its dgrad and wgrad
                e.add_grads(e.casts[x], rec.B * rec.M * rec.N)
        out = rec.B * rec.M * rec.N * bpe(rec.out)
        return e.add(name, rec, inputs, out=out)

    def experts(self, e, name: str, rows: int, K: int, N: int, hit, d, x: str) -> str:
        """The experts' grouped GEMM over `rows` routed rows, under the op's recipe."""
        a, xq = d.activations, self.recipe.activations or d.activations
        if xq != a:
            x = self.quantize(e, name, x, rows, K, a, xq)
            if self.s.train:
                e.add_grads(e.casts[x], rows * N)
        scales = scale_bytes(self.recipe, rows, N, K, experts=hit)
        rec = GroupedGemmOp(rows, K, N, hit, xq, d.weights, a, scale_bytes=scales)
        return e.add(name, rec, (x,), out=rows * N * bpe(a))

    def quantize(self, e, name: str, x: str, rows: int, cols: int, src: DType, dst: DType):
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
        train = self.s.train  # training's casts, as the recipe runs them (Recipe)
        copies = 2 if train and self.recipe.columnwise else 1
        rec = QuantizeOp(rows * cols, src, dst, written, block,
                         amax_read=train and self.recipe.amax_pass, copies=copies)  # fmt: skip
        # the backward keeps one copy (the column-wise one, for the weight gradient)
        node = e.add(f"{name}.quantize", rec, (x,), out=rows * cols * bpe(dst) + written)
        e.quantized[x, dst] = node
        e.casts[node] = node
        return node

    def ffn(
        self,
        e: Emit,
        name: str,
        dim: int,
        d_ff: int,
        act: ir.Activation,
        bias: bool,
        d: ir.DtypePolicy,
        x: str,
        fused: bool = False,
    ) -> str:
        s, a = self.s, d.activations
        fn = ACT_FN[act]
        h_bytes = s.T * d_ff * bpe(a)
        if fused:  # one GEMM writes [gate | up]
            gu = gemm(s.T, 2 * d_ff, dim, bias, d)
            gate = up = self.gemm_node(e, f"{name}.gate_up_proj", gu, (x,))
        elif act.gated:
            gate = self.gemm_node(e, f"{name}.gate_proj", gemm(s.T, d_ff, dim, bias, d), (x,))
        if not fused:
            up = self.gemm_node(e, f"{name}.up_proj", gemm(s.T, d_ff, dim, bias, d), (x,))
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
        return self.gemm_node(e, f"{name}.down_proj", gemm(s.T, dim, d_ff, bias, d), (h,))

    def kv_write(self, e: Emit, name: str, op: ir.Op, per_token: int, inputs) -> None:
        """The copy of this step's keys and values into the cache: `per_token` elements
        per token (the kind's memory says how many)."""
        elements = self.s.T * per_token
        a, kv = op.dtypes.activations, op.dtypes.kv_cache
        rec = UnaryOp((elements,), "copy", a, kv)
        e.add(f"{name}.kv_cache_write", rec, inputs, out=elements * bpe(kv))
