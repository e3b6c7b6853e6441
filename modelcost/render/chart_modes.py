"""How a Markdown page shows its charts (render/formats.chart_embeds): as files beside
it, inline SVG, a note saying how to get them, or not at all."""

from typing import Literal

ChartMode = Literal["files", "inline", "note", "none"]
CHART_MODES: tuple[ChartMode, ...] = ("files", "inline", "note", "none")
