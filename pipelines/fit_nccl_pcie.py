"""The PCIe part of ``python -m pipelines.fit_nccl``: the ``pcie_server`` generation of
conf/network/nccl.yaml fitted to conf/measurements/nccl_pcie.yaml (section 3 of
../shared/reference/gpu-measurements.md).

Every row is priced as a user's run prices it: the row's platform as a ``PcieCluster``, the
``PcieNetwork`` of ``fabric=pcie scheduler=nccl`` with the generation's parameters (and the
row's NCCL_P2P_LEVEL), one collective call through the NetworkModel protocol. The fit minimises
Σ log²(predicted / measured) (scipy ``least_squares``, ``trf``, bounded). Seven rows, six
parameters: each parameter is set by the one or two rows that exercise its transport, so the
residuals mostly show where one value has to serve two systems (SHM ring on 4 x RTX 4090 and
on 4 x RTX 5090).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import yaml

from pipelines.nccl_fit_values import bus_factor, format_value, value_at, with_values
from pipelines.units import parse_bytes

ROOT = Path(__file__).resolve().parent.parent
MEASUREMENTS = ROOT / "conf" / "measurements" / "nccl_pcie.yaml"
GENERATION = "pcie_server"

# (table, transport, row, protocol), start value, bounds
FITTED = (
    (("efficiency", "pci_rc", "ring", "simple"), 0.8, (0.05, 1.0)),
    (("efficiency", "pci_rc", "p2p", "simple"), 0.8, (0.01, 1.0)),
    (("efficiency", "shm", "ring", "simple"), 0.8, (0.05, 1.0)),
    (("efficiency", "shm", "p2p", "simple"), 0.8, (0.05, 1.0)),
    (("efficiency", "shm_sys", "ring", "simple"), 0.8, (0.05, 1.0)),
    (("hop_latency", "shm", "ring", "ll"), 1.0e-6, (0.1e-6, 20e-6)),  # NCCL's PCI row: 1.0 us
)
LL = 0.5  # tuning.cc: LL busBw x .5 (8-byte lines carry 4 data bytes)
# value written from a fitted one: path -> (source path, factor)
TIED = {
    **{("efficiency", t, r, "simple"): (("efficiency", "pci_rc", "ring", "simple"), 1.0)
       for t, r in (("pci", "ring"), ("pci", "tree"), ("pci", "p2p"), ("pci_rc", "tree"))},
    **{("efficiency", t, r, "ll"): (("efficiency", "pci_rc", "ring", "simple"), LL)
       for t, r in (("pci", "ring"), ("pci", "tree"), ("pci", "p2p"), ("pci_rc", "ring"), ("pci_rc", "tree"))},
    ("efficiency", "pci_rc", "p2p", "ll"): (("efficiency", "pci_rc", "p2p", "simple"), LL),
    ("efficiency", "shm", "ring", "ll"): (("efficiency", "shm", "ring", "simple"), LL),
    ("efficiency", "shm", "tree", "ll"): (("efficiency", "shm", "ring", "simple"), LL),
    ("efficiency", "shm", "tree", "simple"): (("efficiency", "shm", "ring", "simple"), 1.0),
    ("efficiency", "shm", "p2p", "ll"): (("efficiency", "shm", "p2p", "simple"), LL),
    ("efficiency", "shm_sys", "ring", "ll"): (("efficiency", "shm_sys", "ring", "simple"), LL),
    ("efficiency", "shm_sys", "tree", "ll"): (("efficiency", "shm_sys", "ring", "simple"), LL),
    ("efficiency", "shm_sys", "tree", "simple"): (("efficiency", "shm_sys", "ring", "simple"), 1.0),
    ("efficiency", "shm_sys", "p2p", "ll"): (("efficiency", "shm", "p2p", "simple"), LL),
    ("efficiency", "shm_sys", "p2p", "simple"): (("efficiency", "shm", "p2p", "simple"), 1.0),
    ("hop_latency", "shm", "p2p", "ll"): (("hop_latency", "shm", "ring", "ll"), 1.0),
    ("hop_latency", "shm_sys", "ring", "ll"): (("hop_latency", "shm", "ring", "ll"), 1.0),
    ("hop_latency", "shm_sys", "p2p", "ll"): (("hop_latency", "shm", "ring", "ll"), 1.0),
}


@dataclass(frozen=True, slots=True)
class PcieRow:
    id: str
    system: str
    gpus: int
    collective: str
    p2p_level: str
    size_bytes: int
    time_s: float  # measured time (busbw rows: size x bus factor / busbw)
    source: str


def load() -> tuple[dict, list[PcieRow]]:
    """(systems {name: platform mapping}, rows) of the PCIe calibration set."""
    data = yaml.safe_load(MEASUREMENTS.read_text())
    rows = []
    for r in data["rows"]:
        size = int(parse_bytes(str(r["size"]), f"{r['id']}.size")) if isinstance(r["size"], str) else int(r["size"])
        if "time_us" in r:
            t = float(r["time_us"]) * 1e-6
        else:
            t = size * bus_factor(r["collective"], r["gpus"]) / (float(r["busbw_GBps"]) * 1e9)
        rows.append(PcieRow(id=r["id"], system=r["system"], gpus=int(r["gpus"]), collective=r["collective"],
                            p2p_level=str(r["p2p_level"]), size_bytes=size, time_s=t, source=r["source"]))
    return data["systems"], rows


def _networks(systems: dict, rows: list[PcieRow]) -> dict:
    """One PcieNetwork (flow capacities, nearest paths) per system, reused for every parameter set."""
    from fabrics.network.pcie import PcieNetwork, PcieNetworkParams
    from pipelines.network import pcie_cluster

    return {name: PcieNetwork(pcie_cluster(systems[name], 1), PcieNetworkParams(scheduler="nccl"))
            for name in sorted({r.system for r in rows})}


def predict(net, gen, row: PcieRow):
    """The Estimate of ``row`` on ``net`` with generation ``gen`` at the row's NCCL_P2P_LEVEL."""
    from fabrics.network.protocol import CollectiveCall

    net.use_nccl(replace(gen, p2p_level=row.p2p_level))
    call = CollectiveCall(call_id=0, region="r", axis="x", collective=row.collective,
                          groups=(tuple(range(row.gpus)),), payload_bytes=row.size_bytes)
    return net.nccl_estimate(call)[0]


@dataclass(frozen=True)
class PcieFit:
    values: dict
    cost: float
    gen: object


def fit(spec=None) -> PcieFit:
    from scipy.optimize import least_squares

    from pipelines.nccl_params import default_mapping, nccl_spec

    spec = nccl_spec(default_mapping()) if spec is None else spec
    gen = next(g for g in spec.generations if g.name == GENERATION)
    systems, rows = load()
    nets = _networks(systems, rows)
    x0 = np.array([v for _, v, _ in FITTED])
    lo = np.array([b[0] for _, _, b in FITTED])
    hi = np.array([b[1] for _, _, b in FITTED])
    measured = np.log([r.time_s for r in rows])

    def residuals(z):
        g = with_values(gen, {p: float(v) for (p, _, _), v in zip(FITTED, z * x0)}, TIED)
        return np.log([predict(nets[r.system], g, r).time_s for r in rows]) - measured

    # start in the middle of the bounds (geometric): an efficiency that starts above a slower
    # transport's on the same ring would not bind and keep a zero gradient
    sol = least_squares(residuals, np.sqrt(lo * hi) / x0, bounds=(lo / x0, hi / x0), method="trf", diff_step=1e-4)
    values = {p: float(v) for (p, _, _), v in zip(FITTED, sol.x * x0)}
    return PcieFit(values=values, cost=float(sol.cost), gen=with_values(gen, values, TIED))


def written_values(result: PcieFit) -> dict[tuple, str]:
    """{(generation, table, transport, row, proto): text} of every '# fitted' / '# tied' PCIe value."""
    out = {(GENERATION, *p): format_value(p[0], v) for p, v in result.values.items()}
    for path, (source, factor) in TIED.items():
        base = result.values.get(source, value_at(result.gen, source))
        out[(GENERATION, *path)] = format_value(path[0], base * factor)
    return out


def residuals(gen=None) -> list[dict]:
    """Every PCIe row with the committed (or given) generation's prediction."""
    from pipelines.nccl_params import default_mapping, nccl_spec

    if gen is None:
        gen = next(g for g in nccl_spec(default_mapping()).generations if g.name == GENERATION)
    systems, rows = load()
    nets = _networks(systems, rows)
    out = []
    for r in rows:
        est = predict(nets[r.system], gen, r)
        out.append({"id": r.id, "gpus": r.gpus, "collective": r.collective, "p2p_level": r.p2p_level,
                    "size_bytes": r.size_bytes, "measured_s": r.time_s, "predicted_s": est.time_s,
                    "choice": est.schedule, "error": est.time_s / r.time_s - 1.0,
                    "busbw_GBps": r.size_bytes * bus_factor(r.collective, r.gpus) / est.time_s / 1e9})
    return out


def markdown_table(rows: list[dict]) -> str:
    lines = ["| row | GPUs | collective | NCCL_P2P_LEVEL | measured | predicted | choice | error |",
             "|---|---:|---|---|---:|---:|---|---:|"]
    for e in rows:
        if e["size_bytes"] > 1024:
            meas = f"{e['size_bytes'] * bus_factor(e['collective'], e['gpus']) / e['measured_s'] / 1e9:.1f} GB/s"
            pred = f"{e['busbw_GBps']:.1f} GB/s"
        else:
            meas, pred = f"{e['measured_s'] * 1e6:.1f} µs", f"{e['predicted_s'] * 1e6:.1f} µs"
        lines.append(f"| {e['id']} | {e['gpus']} | {e['collective']} | {e['p2p_level']} | {meas} | {pred} | "
                     f"{e['choice']} | {e['error'] * 100:+.1f} % |")
    return "\n".join(lines)


__all__ = ["fit", "written_values", "residuals", "markdown_table", "load", "MEASUREMENTS"]
