"""Power of a deployment, for every fabric family (docs/power.md): config -> ClusterSpec -> watts.

``deployment_power(cluster, accelerator, world)`` is the one entry: on paper 003's scale-up fabrics
the system power of Table 12 / D.4 (every accelerator and every switch port of the fabric, numbers
exactly as the paper's) and beside it ``deployment_power_W`` (the fabric less its idle
accelerators); on today's GPU systems (``fabric=nvswitch | gpu_cluster``) the power of what the
deployment uses (``fabrics.power.gpu_power_breakdown``: GPUs with board TDP + host share, their
NVSwitch share, NICs and leaf/spine ports across nodes); on PCIe servers none (no power figures
for the paper-000 servers). ``fabric_power(cfg, accelerator, world)`` does the same from a config.
The GPU figures are data in ``conf/power/gpu.yaml`` and the accelerator YAMLs.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from collectives.errors import SpecError

GPU_FIGURES = Path(__file__).resolve().parent.parent / "conf" / "power" / "gpu.yaml"


def gpu_power_figures(path: Path = GPU_FIGURES):
    """``fabrics.power.GpuPowerFigures`` from ``conf/power/gpu.yaml`` (reference systems, switches, NICs);
    parsed once per file version (a decode point must stay in milliseconds)."""
    path = Path(path)
    return _parsed_figures(str(path), path.stat().st_mtime_ns)


@lru_cache(maxsize=4)  # keyed by the file and its modification time; safe to clear
def _parsed_figures(path: str, mtime_ns: int):
    import yaml

    from fabrics.power import GpuPowerFigures, ReferenceSystem

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    data = yaml.load(Path(path).read_text(), Loader=loader) or {}  # noqa: S506 - a safe loader
    switches, nics = dict(data.get("switches") or {}), dict(data.get("nics") or {})

    def watts(table: dict, name: str, what: str) -> float:
        if name not in table or "watts" not in (table[name] or {}):
            raise SpecError(f"{path}: {what} {name!r} has no watts; known: {', '.join(sorted(table))}")
        return float(table[name]["watts"])

    systems = {}
    for accel, s in dict(data.get("systems") or {}).items():
        systems[str(accel)] = ReferenceSystem(
            name=str(s.get("name", accel)), gpus=s.get("gpus"), switches=s.get("switches"),
            switch_W=watts(switches, s.get("switch"), "switch"), nics=s.get("nics", 0),
            nic_W=watts(nics, s.get("nic"), "nic"))
    nic_W = {int(n["rate_gbps"]): float(n["watts"]) for n in nics.values()}
    return GpuPowerFigures(systems=systems, nic_W=nic_W)


def _config_accelerator_power(cfg: Any) -> float | None:
    given = cfg.get("accelerator_power") if hasattr(cfg, "get") else None
    if given is None:
        return None
    try:
        value = float(given)
    except (TypeError, ValueError):
        raise SpecError(f"accelerator_power={given!r} must be a number of watts (RX00: 2631)") from None
    if not value > 0:
        raise SpecError(f"accelerator_power={value} must be positive watts (RX00: 2631)")
    return value


def _gpu_figures_of(accelerator) -> tuple[float, float] | None:
    board, host = getattr(accelerator, "board_power_W", None), getattr(accelerator, "host_power_W", None)
    return None if board is None or host is None else (float(board), float(host))


def accelerator_power_W(cfg: Any, accelerator, figures=None) -> float | None:
    """Per-accelerator power incl. host share on a scale-up fabric (Table 12): ``accelerator_power``
    in the config, else the table's figure for the accelerator's name, else -- for a GPU with board
    and host figures -- board TDP + host share less its own NVSwitch share (the scale-up fabric
    replaces those switches, as Table 12 takes the switch trays out of the NVL72 rack power);
    None when nothing is known."""
    from fabrics.power import ACCELERATOR_W

    given = _config_accelerator_power(cfg)
    if given is not None:
        return given
    table = ACCELERATOR_W.get(str(accelerator.name).upper())
    if table is not None:
        return table
    gpu = _gpu_figures_of(accelerator)
    if gpu is None:
        return None
    figures = figures or gpu_power_figures()
    try:
        own_switches = figures.system(str(accelerator.name)).switch_W_per_gpu
    except SpecError:
        own_switches = 0.0  # no reference system: its host share is taken whole
    return gpu[0] + gpu[1] - own_switches


def _scaleup_power(cluster, accelerator, world: int, watts: float | None) -> dict | None:
    from fabrics.power import deployment_share_W, power_breakdown
    from fabrics.scaleup.physical import build_fabric

    if watts is None:
        return {"system_power_W": None, "accelerator_power_W": None, "power_breakdown_W": None,
                "power_note": f"accelerator {accelerator.name} has no power figure (Table 12 names B200, B300, "
                              "RX00, Rubin; or give board_power_W and host_power_W, or accelerator_power=<W>)"}
    try:
        pb = power_breakdown(build_fabric(cluster.node), watts)
    except SpecError as exc:  # a link rate without a Table 12 column: timing is still valid
        return {"system_power_W": None, "accelerator_power_W": watts, "power_breakdown_W": None,
                "power_note": str(exc)}
    return {"system_power_W": pb.total_W, "accelerator_power_W": watts, "power_breakdown_W": pb.as_dict(),
            "deployment_power_W": deployment_share_W(pb, min(world, pb.accelerators))}


def _gpu_power(cluster, accelerator, world: int, figures) -> dict:
    from fabrics.power import gpu_power_breakdown

    gpu = _gpu_figures_of(accelerator)
    if gpu is None:
        return {"system_power_W": None, "accelerator_power_W": None, "power_breakdown_W": None,
                "power_note": f"accelerator {accelerator.name} has no board_power_W / host_power_W; set them in "
                              f"conf/accelerator/{accelerator.name}.yaml or as accelerator.board_power_W=..."}
    figures = figures or gpu_power_figures()
    try:
        ref = figures.system(str(accelerator.name))
    except SpecError as exc:  # no reference system for this GPU: timing is still valid
        return {"system_power_W": None, "accelerator_power_W": gpu[0] + gpu[1], "power_breakdown_W": None,
                "power_note": str(exc)}
    ref.host_rest_W(gpu[1])  # a host share below its NVSwitch + NIC parts is bad input: one line, exit 2
    try:
        bd = gpu_power_breakdown(cluster, world=world, board_power_W=gpu[0], host_power_W=gpu[1], figures=figures)
    except SpecError as exc:  # a NIC rate without a power figure: timing is still valid
        return {"system_power_W": None, "accelerator_power_W": gpu[0] + gpu[1], "power_breakdown_W": None,
                "power_note": str(exc)}
    return {"system_power_W": bd.total_W, "accelerator_power_W": gpu[0] + gpu[1],
            "power_breakdown_W": bd.as_dict(), "deployment_power_W": bd.total_W}


def deployment_power(cluster, accelerator, world: int, *, accelerator_power: float | None = None,
                     figures=None) -> dict | None:
    """Power of ``world`` ranks on ``cluster`` (a ``fabrics.spec.ClusterSpec``) with ``accelerator``
    (an ``AcceleratorSpec``): ``system_power_W``, ``accelerator_power_W``, ``power_breakdown_W``,
    ``deployment_power_W`` (what the deployment itself uses; = system_power_W on GPU systems), or
    ``power_note`` saying why there is no figure. None on PCIe servers (no power model).

    ``accelerator_power`` (W per accelerator incl. host share) overrides the scale-up figure."""
    from fabrics.spec import GPU, SCALEUP

    if cluster.family == SCALEUP:
        watts = accelerator_power if accelerator_power is not None else \
            accelerator_power_W({}, accelerator, figures)
        return _scaleup_power(cluster, accelerator, world, watts)
    if cluster.family == GPU:
        if accelerator_power is not None:
            raise SpecError("accelerator_power is the per-XPU figure of the scale-up fabrics (Table 12); on GPU "
                            "fabrics set accelerator.board_power_W and accelerator.host_power_W instead")
        return _gpu_power(cluster, accelerator, world, figures)
    return None


def fabric_power(cfg: Any, accelerator, world: int) -> dict | None:
    """``deployment_power`` of the configured fabric (``pipelines.network.cluster_spec``) with the
    config's ``accelerator_power``; the scale-up Table 12 column comes from ``fabric.link_rate``."""
    from fabrics.spec import PCIE
    from pipelines.network import cluster_spec, fabric_name

    if fabric_name(cfg) == "pcie":
        return None
    cluster = cluster_spec(cfg, accelerator, world)
    if cluster.family == PCIE:
        return None
    return deployment_power(cluster, accelerator, world, accelerator_power=_config_accelerator_power(cfg))


def power_results(power: dict | None, throughput_tok_s: float) -> dict:
    """The results.json power keys of a decode step (docs/power.md)."""
    from fabrics.power import tokens_per_s_per_MW

    if power is None:
        return {}
    watts = power["system_power_W"]
    out = {"system_power_W": watts,
           "tokens_per_s_per_MW": None if watts is None else tokens_per_s_per_MW(throughput_tok_s, watts),
           "power_breakdown_W": power["power_breakdown_W"], "accelerator_power_W": power["accelerator_power_W"]}
    if "power_note" in power:
        out["power_note"] = power["power_note"]
    return out


def power_line(res: dict, power: dict | None = None) -> str:
    """The power line of a decode summary; with ``power``, the deployment's own figure where it differs."""
    if res.get("system_power_W") is None:
        return f"\npower: {res['power_note']}" if "power_note" in res else ""
    line = f"\nsystem power {res['system_power_W'] / 1e6:.3f} MW -> {res['tokens_per_s_per_MW']:.1f} tok/s/MW"
    own = (power or {}).get("deployment_power_W")
    if own is not None and abs(own - res["system_power_W"]) > 1e-9 * res["system_power_W"]:
        line += f" (the deployment's own {own / 1e6:.3f} MW)"
    return line


__all__ = ["accelerator_power_W", "deployment_power", "fabric_power", "gpu_power_figures", "power_line",
           "power_results"]
