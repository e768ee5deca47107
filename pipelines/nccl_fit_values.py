"""Shared pieces of the NCCL-like fits (``pipelines.fit_nccl`` and ``pipelines.fit_nccl_pcie``) and
nccl-tests' bus-bandwidth factors (also what ``gx collective`` reports on GPU fabrics).

A fitted value is addressed by a path: ``(table, transport, algorithm, protocol)`` into a
``fabrics.network.nccl.params.Generation``'s ``hop_latency_s`` / ``efficiency`` tables, or
``(field,)`` for a whole Generation field (``scalars``). Tied values are derived from a fitted one
by a factor (``tied``: {path: (source path, factor)}).
"""

from __future__ import annotations

from dataclasses import replace


# nccl-tests' bus-bandwidth factors (nccl-tests doc/PERFORMANCE.md): busbw = algbw x factor(n)
BUSBW_FACTORS = {
    "allreduce": lambda n: 2 * (n - 1) / n,
    "allgather": lambda n: (n - 1) / n,
    "reducescatter": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "alltoallv": lambda n: (n - 1) / n,
    "sendrecv": lambda n: 1.0,
}


def bus_factor(collective: str, n: int) -> float:
    """nccl-tests' busbw / algbw for ``collective`` on ``n`` ranks."""
    return BUSBW_FACTORS[collective](n)


# YAML key -> Generation field, where the YAML writes the value with a unit
SCALAR_FIELDS = {"nvls_rank_latency": "nvls_rank_latency_s", "cuda_graph_saving": "cuda_graph_saving_s"}
TIME_KEYS = ("hop_latency", "nvls_rank_latency", "cuda_graph_saving")


def value_at(gen, path, scalars=()):
    if path[0] in scalars:
        return getattr(gen, SCALAR_FIELDS.get(path[0], path[0]))
    table, transport, row, proto = path
    return (gen.hop_latency_s if table == "hop_latency" else gen.efficiency)[transport][row][proto]


def with_values(gen, values: dict, tied: dict, *, scalars=(), ring_channels: int | None = None):
    """A copy of ``gen`` with ``values`` {path: value} set and the ``tied`` values derived from them."""
    hop = {t: {r: dict(p) for r, p in rows.items()} for t, rows in gen.hop_latency_s.items()}
    eff = {t: {r: dict(p) for r, p in rows.items()} for t, rows in gen.efficiency.items()}
    every = dict(values)
    for path, (source, factor) in tied.items():
        every[path] = every.get(source, value_at(gen, source, scalars)) * factor
    fields = {}
    for path, value in every.items():
        if path[0] in scalars:
            fields[SCALAR_FIELDS.get(path[0], path[0])] = value
            continue
        table, transport, row, proto = path
        (hop if table == "hop_latency" else eff).setdefault(transport, {}).setdefault(row, {})[proto] = value
    channels = dict(gen.channels)
    if ring_channels is not None:
        channels["ring"] = channels["tree"] = ring_channels
    return replace(gen, hop_latency_s=hop, efficiency=eff, channels=channels, **fields)


def format_value(table: str, value) -> str:
    """How a fitted value is written into conf/network/nccl.yaml."""
    if table in TIME_KEYS:
        return f"{value * 1e6:.4g}us"
    if table == "channels":
        return str(int(value))
    if table.endswith("_Bps"):
        return f"{value:.4e}"
    return f"{value:.4g}"
