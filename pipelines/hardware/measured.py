"""``compute=roofline|measured`` for ``pipelines.decode`` (paper 003, Appendix D.3).

``evaluate_compute(cfg, deployment, network)`` is what ``decode.task`` calls: with
``compute=roofline`` (the default) it executes the roofline plan on ``network``; with
``compute=measured calibration=<calibration.json>`` the plan's compute entries take the measured
durations of the table (``gxnet.calibration``), both steps run on the same network model, and the
results gain ``measured_over_roofline``
per kernel and the roofline step time beside the measured one. Pure (no torch): the table is data.
"""

from __future__ import annotations

import json
from pathlib import Path

from collectives.errors import SpecError
from pipelines.specs import plain


def compute_mode(cfg) -> str:
    node = cfg.get("compute") if hasattr(cfg, "get") else None
    name = (plain(node) or {}).get("name", "roofline") if node is not None else "roofline"
    if name not in ("roofline", "measured"):
        raise SpecError(f"compute={name!r} is unknown; use roofline or measured")
    return name


def load_table(path):
    from gxnet.calibration import CalibrationTable

    if path in (None, "", "???"):
        raise SpecError("compute=measured needs calibration=<path to calibration.json> (written by pipelines.calibrate)")
    p = Path(str(path))
    if not p.is_file():
        raise SpecError(f"calibration={str(path)!r} does not exist; run python -m pipelines.calibrate first")
    try:
        obj = json.loads(p.read_text())
    except json.JSONDecodeError as exc:
        raise SpecError(f"calibration={str(path)!r} is not JSON ({exc.msg} at line {exc.lineno})") from None
    return CalibrationTable.from_dict(obj)


def evaluate_compute(cfg, dep, network):
    """-> (step result, extra results): the step of ``dep`` on ``network`` with roofline kernel
    durations, or with measured ones (``compute=measured``). Both steps run on the same network
    model, so what the results report of it (schedules, plan) is the network that timed them."""
    from gxnet.executor import execute
    from gxnet.plan import build_plan

    roof = build_plan(dep)
    if compute_mode(cfg) == "roofline":
        # an engine (gxnet.kernels) is named; the paper's roofline path keeps its results unchanged
        engine = {} if dep.engine is None else {"engine": dep.engine.name}
        return execute(roof, network), {"compute": "roofline", **engine}
    from gxnet.calibration import apply_calibration, measured_over_roofline

    table = load_table(cfg.get("calibration"))
    measured = apply_calibration(roof, table)
    roof_step = execute(roof, network)
    step = execute(measured, network)  # prepares the same network again with the same demand
    return step, {
        "compute": "measured",
        "calibration": {"path": str(cfg.get("calibration")), "device": table.device, "dtype": table.dtype,
                        "scaled_kernels": len(table.scaled)},
        "roofline_decode_step_s": roof_step.decode_step_s,
        "measured_over_roofline": measured_over_roofline(roof, measured),
    }
