"""Constructing Simlette from typed specs (``network=simlette``; the registry calls ``build_simlette``).

``simulate_collective`` runs one collective alone and returns the collective pipeline's keys.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

from collectives.errors import SpecError
from collectives.topology import CayleyTopology, hypercube, parse_mask
from fabrics.scaleup.latency import LatencyBudget
from fabrics.network.protocol import CollectiveCall, DemandEntry
from fabrics.scaleup.physical import FabricSpec, build_fabric
from fabrics.network.simlette.model import SimletteNetwork
from fabrics.network.simlette.params import SimletteParams
from fabrics.network.simlette.routing import EpsFabric, OcsFabric
from fabrics.spec import ClusterSpec

@dataclass(frozen=True, slots=True, kw_only=True)
class SimletteSpec:
    """``network=simlette``: simulator parameters plus what the schedule and fixed circuits are."""

    params: SimletteParams = field(default_factory=SimletteParams)
    schedule: str | None = None  # force one schedule (None: the best, as the analytical model chooses)
    ocs_folds: tuple[str, ...] = ()  # single_ocs: fixed circuits = hypercube + these fold masks
    ocs_multiplicity: int | None = None  # single_ocs: circuits per logical edge (None: as many as the ports allow)


def endpoint_split(params: SimletteParams, latency: LatencyBudget) -> SimletteParams:
    """The source/sink latency split of one access follows the fabric's Table 9 budget (params.py)."""
    sink = (70 + 70) * 1e-9  # accelerator RX + L2->SM (Table 9 fixed terms)
    return replace(params, source_latency_s=latency.endpoint_s - sink, sink_latency_s=sink)


def build_simlette(cluster: ClusterSpec, spec: SimletteSpec, *, world: int,
                   topology: CayleyTopology | None = None) -> SimletteNetwork:
    """A ready ``SimletteNetwork`` on a scale-up cluster (call ``prepare`` next).

    topology: the Cayley topology fixed circuits of ``single_ocs`` realise (or ``spec.ocs_folds`` /
    ``spec.ocs_multiplicity``: hypercube plus those folds, multiplicity as given or as many as the
    ports allow). Without any of them, ``single_ocs`` - like ``all_ocs`` - gets its circuits from the
    shared-host plan of the deployment demand in ``prepare`` (as ``network=analytical``);
    ``hybrid`` gets its placement and rack circuits there too (``fabric.allocation`` /
    ``fabric.hop_latency`` as for the analytical model). On single_eps / all_eps, ``topology`` is an
    optional logical overlay that groups of its size run their schedule on (the switch still routes
    every transfer in one hop, sprayed over all rails).
    """
    fspec: FabricSpec = cluster.node
    kind, n, ports, rate = fspec.kind, fspec.accelerators, fspec.ports, fspec.link_rate_Bps
    params = endpoint_split(spec.params, fspec.latency)
    phys = build_fabric(fspec)
    schedule = spec.schedule if spec.schedule is not None else (
        None if cluster.options.schedule == "auto" else cluster.options.schedule)
    fixed_circuits = topology is not None or bool(spec.ocs_folds) or spec.ocs_multiplicity
    if kind in ("hybrid", "all_ocs") or (kind == "single_ocs" and not fixed_circuits):
        # deployed fabrics: placement and circuits come from the deployment demand in prepare(),
        # planned exactly as the fabric-aware analytical model plans them (one shared code path)
        from fabrics.network.analytical import FabricAnalytical

        o = cluster.options
        planner = FabricAnalytical(phys, schedule=schedule or "auto", planner_hop_latency_s=o.planner_hop_latency_s,
                                   allocation=o.allocation)
        return SimletteNetwork(None, params, ports=ports, rate_Bps=rate, schedule=schedule, planner=planner,
                               n_accelerators=n)
    if kind == "single_ocs":
        if topology is None:
            topology = _fixed_circuits(n, ports, spec)
        sim_fabric = OcsFabric(phys, topology, params)
    else:
        sim_fabric = EpsFabric(phys, params)
    return SimletteNetwork(sim_fabric, params, ports=ports, rate_Bps=rate,
                           eps_hop_latency_s=fspec.latency.switched_hop_s if kind == "single_eps" else None,
                           schedule=schedule,
                           logical_topology=topology if isinstance(sim_fabric, EpsFabric) else None)


def _fixed_circuits(n: int, ports: int, spec: SimletteSpec) -> CayleyTopology:
    bits = int(n).bit_length() - 1
    if 1 << bits != int(n):
        raise SpecError(f"single_ocs needs a power-of-two number of accelerators for its Cayley circuits, got {n}")
    folds = tuple(parse_mask(m, bits) for m in spec.ocs_folds)
    base = hypercube(bits)
    degree = bits + len(folds)
    mult = spec.ocs_multiplicity or max(1, ports // degree)
    return CayleyTopology(n_bits=bits, generators=base.generators + folds, multiplicity=int(mult),
                          name=f"Q{bits}" + "".join(f"+{m:b}" for m in folds))


def simulate_collective(net: SimletteNetwork, collective: str, payload_bytes: int,
                        groups: tuple[tuple[int, ...], ...] | None = None) -> dict:
    """Run one collective alone on ``net``; returns the results.json keys of the collective pipeline."""
    if groups is None:
        groups = (tuple(range(net.n_accelerators)),)
    demand = (DemandEntry(region="standalone", axis="world", collective=collective, groups=len(groups),
                          ranks=len(groups[0]), calls_per_step=1, payload_bytes=payload_bytes),)
    net.prepare(demand, max(max(g) for g in groups) + 1)
    t0 = time.perf_counter()
    net.register(CollectiveCall(call_id=0, region="standalone", axis="world", collective=collective,
                                groups=groups, payload_bytes=payload_bytes), 0.0)
    done = net.advance()
    wall = time.perf_counter() - t0
    report = net.simulation_report()
    return {
        "completion_s": done[0].end_s - done[0].start_s,
        "schedule": done[0].schedule,
        "sim_wall_s": wall,
        "events": report["events"],
        "simlette": report,
    }
