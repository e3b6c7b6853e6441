"""A sweep's rows written as they come, each given as its values in COLUMNS' order:
CSV (the columns `Sweep.to_csv` writes, byte for byte, written BLOCK rows at a time),
JSON Lines (a row's JSON a line) or Parquet (through pyarrow, an optional extra:
`pip install 'modelcost[parquet]'`), into a binary file. Formatting only."""

from __future__ import annotations

import csv
import io
import time
from typing import IO, Protocol

from modelcost.analyses.sweeps import COLUMNS, RowValues, SweepRow, named
from modelcost.base.errors import SpecError

PARQUET_BATCH = 4096  # rows a Parquet row group holds
BLOCK = 4096  # CSV rows formatted and written at a time, at the most
WAIT = 0.5  # seconds a computed row waits at the most (a pipe's reader sees it)


class RowWriter(Protocol):
    def write(self, values: RowValues) -> None: ...
    def close(self) -> None: ...


class _Csv:
    def __init__(self, out: IO[bytes]) -> None:
        self._out, self._text = out, io.StringIO()
        self._csv = csv.writer(self._text, lineterminator="\n")
        self._rows: list[RowValues] = [COLUMNS]
        self._since = time.monotonic()

    def write(self, values: RowValues) -> None:
        """Keep a row; write the rows kept when they are BLOCK, or WAIT seconds have passed
        since the last write."""
        self._rows.append(values)
        if len(self._rows) >= BLOCK or time.monotonic() - self._since >= WAIT:
            self._flush()

    def _flush(self) -> None:
        self._csv.writerows(self._rows)
        self._rows.clear()
        self._out.write(self._text.getvalue().encode("utf-8"))
        self._out.flush()
        self._text.seek(0)
        self._text.truncate()
        self._since = time.monotonic()

    def close(self) -> None:
        self._flush()
        self._out.flush()


class _JsonLines:
    def __init__(self, out: IO[bytes]) -> None:
        self._out = out

    def write(self, values: RowValues) -> None:
        row = SweepRow.trusted(**named(values))
        self._out.write(row.__pydantic_serializer__.to_json(row) + b"\n")

    def close(self) -> None:
        self._out.flush()


class _Parquet:
    def __init__(self, out: IO[bytes]) -> None:
        try:
            import pyarrow as pa  # type: ignore[import-untyped,import-not-found,unused-ignore]
            import pyarrow.parquet as pq  # type: ignore[import-untyped,import-not-found,unused-ignore]
        except ImportError:
            raise SpecError(
                "--format parquet needs pyarrow, which modelcost does not require",
                filename="modelcost",
                hint="pip install 'modelcost[parquet]', or use --format csv or jsonl",
            ) from None
        self._pa = pa
        self._schema = pa.schema([
            ("model", pa.string()), ("hardware", pa.string()), ("phase", pa.string()),
            ("batch", pa.int64()), ("seq", pa.int64()), ("context", pa.int64()),
            ("prefix", pa.int64()), ("chunk", pa.int64()), ("prompt", pa.int64()),
            ("layout", pa.string()), ("devices", pa.int64()), ("step_ms", pa.float64()),
            ("ms_per_token", pa.float64()), ("tokens_per_s", pa.float64()),
            ("tokens_per_s_device", pa.float64()), ("bound", pa.string()),
            ("mfu_bound", pa.float64()), ("memory", pa.float64()), ("capacity", pa.float64()),
            ("fits", pa.bool_()), ("estimate_ms", pa.float64()),
        ])  # fmt: skip
        self._writer = pq.ParquetWriter(out, self._schema)
        self._batch: list[dict] = []

    def write(self, values: RowValues) -> None:
        self._batch.append(named(values))
        if len(self._batch) >= PARQUET_BATCH:
            self._flush()

    def _flush(self) -> None:
        if self._batch:
            table = self._pa.Table.from_pylist(self._batch, schema=self._schema)
            self._writer.write_table(table)
            self._batch = []

    def close(self) -> None:
        self._flush()
        self._writer.close()


def writer(fmt: str, out: IO[bytes]) -> RowWriter:
    """A writer of `fmt` (STREAMED_FORMATS) into `out`."""
    if fmt == "csv":
        return _Csv(out)
    if fmt == "jsonl":
        return _JsonLines(out)
    return _Parquet(out)
