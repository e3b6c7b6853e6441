"""Shared paths for the test suite (nothing here depends on ../shared)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "specs" / "models"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
ZOO = sorted(MODELS.glob("*.model"))

GOLDEN = Path(__file__).resolve().parent / "golden"


def pytest_addoption(parser):
    parser.addoption(
        "--update-goldens",
        action="store_true",
        help="rewrite tests/golden/* from the current output instead of comparing",
    )
