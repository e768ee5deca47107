"""Measured kernel durations in place of the roofline (paper 003, Appendix D.3: measured kernel
times can replace the roofline estimates).

A calibration table is plain data (JSON, ``format: gxnet.calibration/1``) written by
``pipelines.calibrate`` on real hardware; gxnet never measures anything itself and never
imports torch. ``CalibrationTable.from_dict`` validates it; ``apply_calibration(plan, table)``
returns a new ``ExecutionPlan`` whose compute entries carry the measured durations (the
collectives are untouched: they stay with the network model), so ``execute`` runs unchanged.
``measured_over_roofline(roofline_plan, measured_plan)`` gives the ratio per kernel.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Mapping

from collectives.errors import SpecError
from gxnet.deployment import Deployment
from gxnet.plan import ComputeEntry, ExecutionPlan

TABLE_FORMAT = "gxnet.calibration/1"


def deployment_key(d: Deployment) -> dict:
    """What a table is measured for; a table of another deployment has other shapes."""
    p = d.parallel
    q = d.precision
    return {"model": d.model.name, "world": d.world, "batch": d.batch, "context_tokens": d.context_tokens,
            "precision": {"name": q.name, "weights_bits": q.weights_bits, "kv_bits": q.kv_bits,
                          "activations_bits": q.activations_bits},
            "parallel": {"scheme": p.scheme, "kvp": p.kvp, "tpa": p.tpa, "ep": p.ep, "tpe": p.tpe}}


@dataclass(frozen=True, slots=True, kw_only=True)
class CalibrationTable:
    deployment: Mapping  # deployment_key of what was measured
    device: str  # e.g. "cuda NVIDIA H200" or "cpu x86_64"
    dtype: str
    durations_s: Mapping  # (section, entry name, track) -> measured seconds per call
    scaled: frozenset  # (section, entry name, track) whose value was extrapolated from smaller sizes

    def __post_init__(self) -> None:
        for key, v in self.durations_s.items():
            if not (isinstance(v, (int, float)) and v >= 0):
                raise SpecError(f"calibration entry {key[1]} (track {key[2]}) has duration {v!r}; must be seconds >= 0")

    @staticmethod
    def from_dict(obj: dict) -> "CalibrationTable":
        if not isinstance(obj, dict) or obj.get("format") != TABLE_FORMAT:
            got = obj.get("format") if isinstance(obj, dict) else type(obj).__name__
            raise SpecError(f"calibration table format {got!r} is not {TABLE_FORMAT!r}; write it with pipelines.calibrate")
        durations, scaled = {}, set()
        for k in obj.get("kernels", []):
            try:
                key = (str(k["section"]), str(k["name"]), int(k["track"]))
                durations[key] = float(k["measured_s"])
            except (KeyError, TypeError, ValueError):
                raise SpecError("calibration table entry lacks section/name/track/measured_s; rerun pipelines.calibrate") from None
            if k.get("scaled"):
                scaled.add(key)
        dev = obj.get("device") or {}
        return CalibrationTable(deployment=MappingProxyType(dict(obj.get("deployment") or {})),
                                device=f"{dev.get('type', '?')} {dev.get('name', '')}".strip(),
                                dtype=str(obj.get("dtype", "?")), durations_s=MappingProxyType(durations),
                                scaled=frozenset(scaled))


def check_matches(table: CalibrationTable, d: Deployment) -> None:
    want = deployment_key(d)
    have = {k: table.deployment.get(k) for k in want}
    if have != want:
        diff = [f"{k}={have[k]!r} (deployment: {want[k]!r})" for k in want if have[k] != want[k]]
        raise SpecError(f"calibration table was measured for another deployment: {'; '.join(diff)}; rerun "
                        f"pipelines.calibrate with this model/parallel/batch/context")


def apply_calibration(plan: ExecutionPlan, table: CalibrationTable) -> ExecutionPlan:
    """The same plan with every compute entry's per-track duration taken from the table."""
    check_matches(table, plan.deployment)
    sections = []
    for sec in plan.sections:
        entries = []
        for e in sec.entries:
            if isinstance(e, ComputeEntry):
                durs = []
                for track in range(len(e.durations_s)):
                    key = (sec.name, e.name, track)
                    if key not in table.durations_s:
                        raise SpecError(f"calibration table has no entry for kernel {e.name} ({e.kernel}) of track "
                                        f"{track}; rerun pipelines.calibrate for this deployment")
                    durs.append(table.durations_s[key])
                e = replace(e, durations_s=tuple(durs), floor_s=())  # measured: the whole duration
            entries.append(e)
        sections.append(replace(sec, entries=tuple(entries)))
    return replace(plan, sections=tuple(sections))


def measured_over_roofline(roofline: ExecutionPlan, measured: ExecutionPlan) -> dict[str, float | None]:
    """``"<section>/<entry>/<kernel>"`` -> measured / roofline of the busiest track."""
    out: dict[str, float | None] = {}
    for s_r, s_m in zip(roofline.sections, measured.sections):
        for e_r, e_m in zip(s_r.entries, s_m.entries):
            if isinstance(e_r, ComputeEntry):
                r, m = e_r.durations_s[0], e_m.durations_s[0]
                out[f"{s_r.name}/{e_r.name}/{e_r.kernel}"] = m / r if r > 0 else None
    return out
