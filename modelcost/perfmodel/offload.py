"""Activation offloading's traffic: the activations a layer saves for its backward,
copied to host memory during the forward and back before the backward needs them."""

from __future__ import annotations

from typing import ClassVar

from .base import Number, OpRecord, Unit


class OffloadOp(OpRecord, frozen=True):
    """`saved` bytes (the saved activations of `layers` layers, one microbatch's) copied
    to host memory in the forward and reloaded in the backward, over the device's host
    link (Transformer Engine's CPU offload, which Megatron-Core's cpu_offloading_num_layers
    drives: asynchronous copies on their own stream). No arithmetic; each pass moves the
    bytes once, and the host link bounds it (roofs.roof)."""

    kind: ClassVar[str] = "Offload"
    unit: ClassVar[Unit] = Unit.host

    saved: int
    layers: int

    @property
    def precision(self) -> str:
        return "bf16"  # no math: the vector roof it is never bound by

    def describe(self) -> str:
        return f"{self.saved:,} bytes of {self.layers} layers' saved activations ↔ host"

    def flops(self) -> Number:
        return 0

    def bytes(self) -> Number:
        return self.saved  # device → host, in the forward

    def flops_bwd(self) -> Number:
        return 0

    def bytes_bwd(self) -> Number:
        return self.saved  # host → device, before the layers' backward

    def backward_reads_inputs(self) -> bool:
        return False  # a copy of what the layers keep, not a reader of it
