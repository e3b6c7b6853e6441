"""Shared paths for the test suite (nothing here depends on ../shared)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "specs" / "models"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
ZOO = sorted(MODELS.glob("*.model"))
