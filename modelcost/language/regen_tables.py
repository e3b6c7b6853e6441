"""Rewrite modelcost/language/_tables.marshal from the grammars:
`python -m modelcost.language.regen_tables`."""

import sys

from .grammar_tables import TABLES_FILE, generate

TABLES_FILE.write_bytes(generate())
print(f"wrote {TABLES_FILE}", file=sys.stderr)
