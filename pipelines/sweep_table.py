"""The sweep's append-only results table: ``results.jsonl`` in the sweep directory.

One JSON line per point outcome (index, config hash, name, status, metrics, wall time, worker),
written with one ``write`` on an ``O_APPEND`` descriptor, so a killed driver leaves whole lines
(a torn last line is skipped when read). A point's hash is written FINISHED at most once: a
rerun reads the table (``finished``) and skips those points, so a killed and resumed sweep has
every point once. The driver keeps only the set of finished hashes, never the rows.
"""

from __future__ import annotations

import heapq
import json
import os
from pathlib import Path
from typing import Iterator

TABLE = "results.jsonl"


def read_rows(path: Path) -> Iterator[dict]:
    """The table's rows in order; a line a kill cut short is skipped."""
    try:
        f = open(path, "rb")
    except OSError:
        return
    with f:
        for line in f:
            if not line.endswith(b"\n"):
                continue
            try:
                yield json.loads(line)
            except ValueError:
                continue


def finished_rows(dirs, full: bool = True, keep_metrics_below: int = 200) -> dict[str, dict]:
    """FINISHED rows by config hash over the tables of ``dirs`` (the first row of a hash wins).
    ``full=False`` (a large sweep): a row keeps its metrics only for the first
    ``keep_metrics_below`` indices (the printed table), so the driver holds a few bytes a point."""
    found: dict[str, dict] = {}
    for d in dirs:
        for row in read_rows(Path(d) / TABLE):
            h = row.get("cfg_hash")
            if row.get("status") != "FINISHED" or not h or h in found:
                continue
            if not full and row.get("index", 0) >= keep_metrics_below:
                row = {"index": row.get("index"), "wall_s": row.get("wall_s")}
            found[h] = row
    return found


class ResultsTable:
    """Appends rows to ``<sweep dir>/results.jsonl``; a FINISHED hash is appended once."""

    def __init__(self, sweep_dir: Path, finished: set[str] | None = None):
        self.path = Path(sweep_dir) / TABLE
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.finished: set[str] = set(finished or ()) | {
            r["cfg_hash"] for r in read_rows(self.path) if r.get("status") == "FINISHED"}
        self._torn_tail()
        self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def _torn_tail(self) -> None:
        """End a line a kill cut short, so the next row starts on a line of its own."""
        try:
            with open(self.path, "rb") as f:
                f.seek(-1, os.SEEK_END)
                last = f.read(1)
        except OSError:
            return
        if last and last != b"\n":
            with open(self.path, "ab") as f:
                f.write(b"\n")

    def append(self, row: dict) -> bool:
        """Write one row; False (nothing written) for a hash already FINISHED in the table."""
        h = row.get("cfg_hash")
        if row.get("status") == "FINISHED":
            if h in self.finished:
                return False
            self.finished.add(h)
        os.write(self.fd, (json.dumps(row, separators=(",", ":"), default=str) + "\n").encode())
        return True

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def table_row(index: int, cfg_hash: str, name: str, status: str, metrics: dict | None, *,
              wall_s=None, worker=None, error=None) -> dict:
    row = {"index": index, "cfg_hash": cfg_hash, "name": name, "status": status, "wall_s": wall_s,
           "worker": worker, "metrics": metrics or {}}
    if error:
        row["error"] = error
    return row


def lower_is_better(metric: str) -> bool:
    """Times (``_s``) and energies are better small; rates and counts better large."""
    return metric.endswith(("_s", "_J", "_bytes"))


def metric_value(metrics: dict, metric: str):
    """``metric``'s value; a pattern with ``*`` (``schedules.*.time_s``) takes the best of the
    metrics it matches (the smallest for times)."""
    if "*" not in metric:
        return metrics.get(metric)
    from fnmatch import fnmatchcase

    values = [v for k, v in metrics.items() if fnmatchcase(k, metric) and isinstance(v, (int, float))]
    if not values:
        return None
    return min(values) if lower_is_better(metric) else max(values)


def top_rows(dirs, metric: str, k: int) -> list[dict]:
    """The ``k`` best FINISHED rows by ``metric`` (one per hash), read in one streaming pass."""
    sign = 1.0 if lower_is_better(metric) else -1.0
    heap: list = []
    seen: set[str] = set()
    for d in dirs:
        for row in read_rows(Path(d) / TABLE):
            h = row.get("cfg_hash")
            value = metric_value(row.get("metrics") or {}, metric)
            if row.get("status") != "FINISHED" or h in seen or not isinstance(value, (int, float)):
                continue
            seen.add(h)
            item = (-sign * value, -row.get("index", 0), h, row)
            if len(heap) < k:
                heapq.heappush(heap, item)
            elif item > heap[0]:
                heapq.heapreplace(heap, item)
    return [item[3] for item in sorted(heap, reverse=True)]


def write_dedup_csv(dirs, out: Path) -> int:
    """All of the sweep's points once (a point's FINISHED row, else its last other row) as CSV,
    metrics as ``m.<name>`` columns: the table artifact a parent run carries for a large sweep.
    Two passes over the tables; in between only each point's raw line is held."""
    import csv

    chosen: dict[str, tuple[bool, bytes]] = {}
    metric_cols: set[str] = set()
    for d in dirs:
        try:
            f = open(Path(d) / TABLE, "rb")
        except OSError:
            continue
        with f:
            for line in f:
                if not line.endswith(b"\n"):
                    continue
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                h = row.get("cfg_hash")
                old = chosen.get(h)
                if h and (old is None or not old[0]):
                    chosen[h] = (row.get("status") == "FINISHED", line)
                    metric_cols.update(row.get("metrics") or ())
    cols = ["index", "name", "cfg_hash", "status", "wall_s", "worker", "error"] + [f"m.{m}" for m in sorted(metric_cols)]
    rows = sorted(((json.loads(line).get("index", 0), line) for _, line in chosen.values()), key=lambda x: x[0])
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        for _, line in rows:
            row = json.loads(line)
            w.writerow({k: v for k, v in row.items() if k != "metrics"}
                       | {f"m.{m}": v for m, v in (row.get("metrics") or {}).items()})
    return len(chosen)
