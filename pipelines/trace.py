"""Chrome trace event format (opens in Perfetto / chrome://tracing).

One track (thread) per distinct rank behaviour; compute and collectives are complete ('X')
slices with microsecond timestamps.
"""

from __future__ import annotations

from typing import Any, Iterable


def _get(ev: Any, key: str, default: Any = None) -> Any:
    return ev.get(key, default) if isinstance(ev, dict) else getattr(ev, key, default)


def chrome_trace(events: Iterable[Any], *, process_name: str = "gxnet decode step") -> dict:
    tracks: dict[str, int] = {}
    out: list[dict] = [{"name": "process_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": process_name}}]
    slices: list[dict] = []
    for ev in events:
        track = str(_get(ev, "track", "rank"))
        tid = tracks.setdefault(track, len(tracks))
        slices.append({
            "name": str(_get(ev, "name")),
            "cat": str(_get(ev, "cat", "compute")),
            "ph": "X",
            "ts": float(_get(ev, "start_s")) * 1e6,
            "dur": float(_get(ev, "dur_s")) * 1e6,
            "pid": 0,
            "tid": tid,
            "args": dict(_get(ev, "args", {}) or {}),
        })
    for track, tid in tracks.items():
        out.append({"name": "thread_name", "ph": "M", "pid": 0, "tid": tid, "args": {"name": track}})
    return {"traceEvents": out + slices, "displayTimeUnit": "ns"}
