"""Ring attention's bookkeeping as Transformer Engine runs it beside the attention
kernels: the forward's output corrections and the backward's gradient additions of
context parallelism's p2p ring (AttnFuncWithCPAndKVP2P)."""

from __future__ import annotations

from typing import ClassVar

from modelcost.base.dtypes import DType

from .base import Number, OpRecord, bpe


class RingMergeOp(OpRecord, frozen=True):
    """The elementwise work around `steps` (≥ 2) ring steps of one rank's attention, in
    the activations' dtype (TransformerEngine @e7c550c5 context_parallel.py; bf16:
    nothing is kept in fp32), for the rank that does the most: with a causal mask the
    last (load-balanced chunks: each of its steps after the first attends all its
    queries over half of a chunk's keys), without one any. `q`, `o`, `kv`: elements of
    the rank's queries, attention output, and keys and values together.

    Forward: the keys and values concatenated into the first send buffer (read and
    write kv), the output set from the first step's (read and write o, one multiply an
    element) and corrected by each later step's (read the step's output and the running
    one, write it: 3·o elements, a multiply and an add an element); softmax statistics
    (fp32, one a query row and head) left out.

    Backward: the keys and values copied into the ring's buffer (2·kv); dq set from the
    first step (2·q) and added to by each later one (3·q, an add an element); dk and dv
    causal: set over half the chunk at the first step (kv), added to over half at each
    step between (3·kv/2) and whole at the last, the diagonal (3·kv); without a mask,
    set whole (2·kv) and added to whole (3·kv) at each later step. Several kernels a
    pass, priced as one launch. The ring's sends are the collective's (kv_ring)."""

    kind: ClassVar[str] = "RingMerge"

    q: int
    o: int
    kv: int
    steps: int
    causal: bool = True
    dtype: DType = DType.bf16

    def describe(self) -> str:
        mask = "causal" if self.causal else "no mask"
        return f"{self.steps} ring steps, {mask}: o {self.o:,}, q {self.q:,}, kv {self.kv:,}"

    def flops(self) -> Number:
        return self.o + 2 * (self.steps - 1) * self.o

    def bytes(self) -> Number:
        later = self.steps - 1
        return (2 * self.kv + 2 * self.o + 3 * later * self.o) * bpe(self.dtype)

    def _dkv(self) -> tuple[int, int]:
        """(elements read and written, additions) of dk and dv over the steps."""
        later = self.steps - 1
        if not self.causal:
            return 2 * self.kv + 3 * later * self.kv, later * self.kv
        half = self.kv // 2
        return half * 2 + 3 * (later - 1) * half + 3 * self.kv, (later - 1) * half + self.kv

    def flops_bwd(self) -> Number:
        return (self.steps - 1) * self.q + self._dkv()[1]

    def bytes_bwd(self) -> Number:
        dq = 2 * self.q + 3 * (self.steps - 1) * self.q
        return (2 * self.kv + dq + self._dkv()[0]) * bpe(self.dtype)

    def backward_reads_inputs(self) -> bool:
        return False  # the backward reads the attention's kept O and its gradients only
