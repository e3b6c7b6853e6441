"""The one base of the frozen records that travel between stages (syntax nodes, op
records, graph nodes, costs, roofline timings): immutable values with structural
equality, built by msgspec in C.

Why not `@dataclass(frozen=True, slots=True)`: each such class costs ~1.2 ms to define
(it compiles six generated methods), some 90 ms of every command's start across the
package; a Struct costs ~0.03 ms and is faster to instantiate. Records are not
validated: they are built by modelcost's own stages from checked input, and mypy checks
their types.
"""

from __future__ import annotations

from msgspec import Struct
from msgspec.structs import asdict, force_setattr, replace

__all__ = ["Record", "asdict", "force_setattr", "replace"]


class Record(Struct, frozen=True):
    """Frozen, slotted, compared and hashed by value; positional or keyword init."""
