"""Ring attention's bookkeeping as Transformer Engine runs it beside the attention
kernels: the forward's output corrections and the backward's gradient additions of
context parallelism's p2p ring (AttnFuncWithCPAndKVP2P)."""

from __future__ import annotations

from typing import ClassVar

from ..dtypes import DType
from .base import Number, OpRecord, bpe


class RingMergeOp(OpRecord, frozen=True):
    """The elementwise work around `steps` ring steps of one rank's attention, the rank
    that does the most (the last: each of its steps after the first attends all its
    queries over half of a chunk's keys), in the activations' dtype (TransformerEngine
    @e7c550c5 context_parallel.py; bf16: nothing is kept in fp32). `q`, `o`, `kv`:
    elements of the rank's queries, attention output, and keys and values together.

    Forward: the keys and values concatenated into the first send buffer (read and
    write kv), the output initialised from the first step's (read and write o, one
    multiply an element) and corrected by each later step's (read the step's output and
    the running one, write it: 3·o bytes-worth, a multiply and an add an element);
    softmax statistics (fp32, one a query row and head) left out.

    Backward: the keys and values copied into the ring's buffer (2·kv); dq set from the
    first step and added to by each later one (2·q, then 3·q a step, an add an
    element); dk and dv likewise, over half the chunk after the first step (2·kv, then
    3·kv/2 a step). The ring's sends are the collective's (kv_ring)."""

    kind: ClassVar[str] = "RingMerge"

    q: int
    o: int
    kv: int
    steps: int
    dtype: DType = DType.bf16

    def describe(self) -> str:
        return f"{self.steps} ring steps: o {self.o:,}, q {self.q:,}, kv {self.kv:,}"

    def flops(self) -> Number:
        return self.o + 2 * (self.steps - 1) * self.o

    def bytes(self) -> Number:
        later = self.steps - 1
        return (2 * self.kv + 2 * self.o + 3 * later * self.o) * bpe(self.dtype)

    def flops_bwd(self) -> Number:
        return (self.steps - 1) * (self.q + self.kv // 2)

    def bytes_bwd(self) -> Number:
        later = self.steps - 1
        dq = 2 * self.q + 3 * later * self.q
        dkv = 2 * self.kv + 3 * later * self.kv // 2
        return (2 * self.kv + dq + dkv) * bpe(self.dtype)

    def backward_reads_inputs(self) -> bool:
        return False  # the backward reads the attention's kept O and its gradients only
