"""modelcost's version, as the reports' footers and `--version` state it."""

__version__ = "0.1.0"
