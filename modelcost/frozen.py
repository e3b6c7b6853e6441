"""The one base of every pydantic model modelcost defines: frozen (values, not objects
that change), no unknown fields, validators built on first use (building them all up
front costs more than compiling a spec)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
