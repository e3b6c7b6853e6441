"""`python -m modelcost` runs the command line."""

from .cli import run

run()
