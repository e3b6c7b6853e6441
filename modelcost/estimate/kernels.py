"""Which Gluon kernel would serve a GEMM: the catalog (specs/kernels/gluon.json) and the
selection rule, by arch, by dtype, then by shape.

1. Arch: gfx950 → the gfx950 tutorial kernels and AITER's; gfx942 → the CDNA3 port
   (fp16/bf16 only); Hopper → Gluon tutorial 07; Blackwell → tutorial 08, or 11 for
   block-scaled formats. Nothing for other parts.
2. Dtype: fp16/bf16 → a16w16; BF8 → a8w8; e4m3 → AITER a8w8 (block-scaled weights:
   a8w8_blockscale); MXFP4 → a4w4. Mixed activation/weight dtypes have no kernel.
3. Shape: M ≤ 64 is the memory-bound (decode) regime: the memory-bound kernel, a
   fixed-shape split-K decode kernel, or a masked/split-K AITER kernel. Otherwise the
   256×256 tile kernels when M, N, K meet their alignment; else a masked kernel, or the
   tile kernel with the padding it needs.
"""

from __future__ import annotations

import math
from functools import cache, lru_cache

from modelcost.base.frozen import Frozen
from modelcost.base.resources import kernel_table
from modelcost.ir.report import KernelChoice
from modelcost.perfmodel import GemmOp, GroupedGemmOp

SMALL_M = 64  # at or below: decode-shaped, memory-bound
GLUON_ARCHES = ("gfx950", "gfx942", "sm90", "sm100")


class Kernel(Frozen):
    id: str
    title: str
    repo: str
    path: str
    url: str
    url_pinned: str
    arch: str
    family: str
    a: list[str]
    b: list[str]
    tile: list[int | None] | None
    requires: dict[str, int]
    tflops: float | None
    measured: str | None
    measured_on: str | None = None  # the shipped target the TFLOPS were measured on
    measured_precision: str | None = None
    pin: str | None


@cache
def catalog() -> tuple[Kernel, ...]:
    return tuple(Kernel(**k) for k in kernel_table("gluon")["kernels"])


def _choice(k: Kernel | None, reason: str, exact: bool = False) -> KernelChoice:
    if k is None:
        return KernelChoice.trusted(reason=reason, exact=False)
    return KernelChoice.trusted(
        id=k.id,
        title=k.title,
        url=k.url,
        tflops=k.tflops,
        measured=k.measured,
        pin=k.pin,
        reason=reason,
        exact=exact,
    )


def _misfit(k: Kernel, M: int, N: int, K: int) -> str | None:
    """Why (M, N, K) does not meet the kernel's alignment, or None."""
    r = k.requires
    for dim, value, key in (("M", M, "m"), ("N", N, "n"), ("K", K, "k")):
        if key in r and value % r[key]:
            padded = math.ceil(value / r[key]) * r[key]
            return f"{dim}={value} is not a multiple of {r[key]} (padding to {padded})"
    if "k_min" in r and r["k_min"] > K:
        return f"K={K} is below the kernel's minimum of {r['k_min']}"
    return None


@lru_cache(maxsize=4096)  # ops are values: a sweep asks again for the same GEMMs
def serve(op: GemmOp | GroupedGemmOp, arch: str, compute_units: int = 256) -> KernelChoice:
    """The kernel that would serve this GEMM on `arch` (a part with `compute_units` CUs
    or SMs), and why (or why none)."""
    if arch not in GLUON_ARCHES:
        return _choice(
            None,
            f"Gluon has no GEMM kernel for {arch} (it targets Hopper, "
            "Blackwell, gfx942 and gfx950)",
        )
    if isinstance(op, GroupedGemmOp):
        a, b = op.x.value, op.w.value
        M, N, K = max(1, round(op.M / op.G)) if op.G else op.M, op.N, op.K
        prefix = f"grouped GEMM (~{M} rows per expert, no grouped Gluon kernel): per expert, "
    else:
        a, b, M, N, K = op.a.value, op.b.value, op.M, op.N, op.K
        prefix = ""
    on_arch = [k for k in catalog() if k.arch == arch]
    fits = [k for k in on_arch if a in k.a and b in k.b]
    if not fits and a != b:
        # no mixed-dtype kernel: the activations would be quantized to the weights' format
        fits = [k for k in on_arch if b in k.a and b in k.b]
        if not fits:
            return _choice(
                None,
                f"{prefix}{a} activations × {b} weights: no Gluon kernel "
                f"takes mixed dtypes, nor {b} on both sides on {arch}",
            )
        prefix += f"{a} activations quantized to {b} (no mixed-dtype kernel): "
        choice = _pick(fits, M, N, K, prefix, compute_units)
        return KernelChoice.trusted(**{**choice.__dict__, "exact": False})
    if not fits:
        return _choice(None, f"{prefix}no Gluon kernel for {a} on {arch}")
    return _pick(fits, M, N, K, prefix, compute_units)


def _pick(
    fits: list[Kernel], M: int, N: int, K: int, prefix: str, compute_units: int
) -> KernelChoice:
    if M <= SMALL_M:
        return _small_m(fits, M, N, K, prefix, compute_units)
    tiled = [k for k in fits if k.tile and k.tile[0] and k.tile[0] >= 128]
    for k in tiled:
        if _misfit(k, M, N, K) is None:
            tm, tn, tk = k.tile or (None, None, None)
            fit = (
                f"tile-aligned for {tm}×{tn}×{tk}"
                if k.requires
                else "TMA bounds handle any M, N, K"
            )
            return _choice(k, f"{prefix}compute-shaped, {fit}", exact=True)
    masked = next((k for k in fits if k.family in ("a8w8_masked", "a4w4_splitk")), None)
    if tiled:
        why = _misfit(tiled[0], M, N, K)
        if masked is not None:
            return _choice(masked, f"{prefix}{why}: served by {masked.title}")
        return _choice(tiled[0], f"{prefix}{why}", exact=False)
    k = masked or fits[0]
    return _choice(k, f"{prefix}{k.title}", exact=masked is not None)


def _small_m(
    fits: list[Kernel], M: int, N: int, K: int, prefix: str, compute_units: int
) -> KernelChoice:
    for k in fits:
        r = k.requires
        if k.family == "decode_m32" and r.get("n_eq") == N and r.get("k_eq") == K and M <= 32:
            return _choice(
                k,
                f"{prefix}M={M}: a fixed-shape split-K decode kernel for N={N}, K={K}",
                exact=True,
            )
    mem = next((k for k in fits if k.family == "memory_bound"), None)
    if mem is not None:
        tn = mem.tile[1] if mem.tile and mem.tile[1] else 256
        groups = N // tn
        note = (
            f"; N/{tn} = {groups} workgroups fill {groups} of {compute_units} CUs: split-K "
            "would be needed to reach full bandwidth"
            if groups < compute_units
            else ""
        )
        return _choice(
            mem,
            f"{prefix}M={M} is below the 256-row tile: served by the memory-bound kernel{note}",
            exact=M <= 32,
        )
    masked = next((k for k in fits if k.family in ("a4w4_splitk", "a8w8_masked")), None)
    if masked is not None:
        return _choice(masked, f"{prefix}M={M} is below the 256-row tile: {masked.title}")
    k = fits[0]
    return _choice(
        k,
        f"{prefix}M={M} fills little of the {k.tile[0] if k.tile else ''}-row "
        "tile: memory-bound, served by the general kernel",
    )
