"""Deployment-time communication demand of one decode step (paper 003, Table 1, Section 3.1).

Read off the sharded graph: one row per (region, mesh axis, collective) with G groups of R
ranks, calls per step (occurrences x section repetitions) and the per-rank payload at this
batch. Axes of a region's mesh that carry no collective get a ``none`` row with 0 calls and
0 bytes (Table 1's TPA row); so does a collective whose axis has a single rank.
"""

from __future__ import annotations

from fabrics.network.protocol import DemandEntry
from gxnet.compile import CollectiveSlot
from gxnet.deployment import Deployment

_AXIS_ORDER = {"world": 0, "kvp": 1, "dpa": 1, "tpa": 2, "ep": 3, "tpe": 4, "tp": 4}
_REGION_ORDER = {"embedding": 0, "attention": 1, "ffn": 2, "lm_head": 3}
_MESH_AXES = {"helix": {"attention": ("kvp", "tpa"), "ffn": ("ep", "tpe")},
              "tp_ep": {"attention": (), "ffn": ("ep", "tp")},
              "dp_attention": {"attention": ("dpa", "tpa"), "ffn": ("ep", "tpe")}}


def demand_from_values(d: Deployment, prog, values) -> tuple[DemandEntry, ...]:
    p = d.parallel
    rows: dict[tuple[str, str, str], list[int]] = {}
    for sec in prog.sections:
        for slot in sec.slots:
            if isinstance(slot, CollectiveSlot):
                key = (slot.region, slot.axis, slot.collective)
                calls_payload = rows.setdefault(key, [0, 0])
                calls_payload[0] += sec.repeat
                # Layers of different kinds (GPT-OSS sliding/full) carry equal payloads; if they
                # ever differ the demand records the largest per-call buffer.
                calls_payload[1] = max(calls_payload[1], int(round(values[slot.index])))
    out = []
    for (region, axis, coll), (calls, payload) in rows.items():
        n = p.axis_size(axis)
        if n == 1:
            coll, calls, payload = "none", 0, 0
        out.append(DemandEntry(region=region, axis=axis, collective=coll, groups=p.world // n, ranks=n,
                               calls_per_step=calls, payload_bytes=payload))
    for region, axes in _MESH_AXES[p.scheme].items():
        for axis in axes:
            if not any(r.region == region and r.axis == axis for r in out):
                n = p.axis_size(axis)
                out.append(DemandEntry(region=region, axis=axis, collective="none", groups=p.world // n,
                                       ranks=n, calls_per_step=0, payload_bytes=0))
    out.sort(key=lambda r: (_REGION_ORDER.get(r.region, 9), _AXIS_ORDER.get(r.axis, 9)))
    return tuple(out)
