"""Rows for scripts and notebooks: one mixin giving a result with `records()` its
`to_records()`, `to_csv()` and (pandas installed, never required) `to_dataframe()`."""

from __future__ import annotations

import csv
import io
from typing import Any


class Tabular:
    """A result made of rows; subclasses say what a row is in `records()`."""

    def records(self) -> list[dict[str, Any]]:
        raise NotImplementedError

    def to_records(self) -> list[dict[str, Any]]:
        """One plain dict per row, fields in order."""
        return self.records()

    def to_csv(self) -> str:
        """A header line of field names, then one line per row, values as they are."""
        rows = self.records()
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        if rows:
            writer.writerow(list(rows[0]))
            writer.writerows(list(r.values()) for r in rows)
        return out.getvalue()

    def to_dataframe(self):  # -> pandas.DataFrame; pandas is optional
        """The rows as a pandas DataFrame (needs pandas, which modelcost does not)."""
        try:
            import pandas as pd  # type: ignore[import-untyped,import-not-found,unused-ignore]
        except ImportError:
            raise ImportError("to_dataframe needs pandas: pip install pandas") from None
        return pd.DataFrame.from_records(self.records())
