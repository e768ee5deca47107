"""Constructing Simlette from plain numbers (the config edge parses units; this takes numbers).

``simlette_from_config(fabric_numbers, network, world=...)`` is what ``pipelines`` calls for
``network=simlette``; ``simulate_collective`` runs one collective and returns results.json keys.
"""

from __future__ import annotations

import time
from typing import Any, Mapping

from collectives.errors import SpecError
from collectives.topology import CayleyTopology, hypercube, parse_mask
from fabrics.latency import LatencyBudget
from fabrics.network_model import CollectiveCall, DemandEntry
from fabrics.physical import FABRIC_KINDS, FabricSpec, build_fabric
from fabrics.simlette.model import SimletteNetwork
from fabrics.simlette.params import SimletteParams
from fabrics.simlette.routing import EpsFabric, OcsFabric

NETWORK_KEYS = ("name", "mode", "buffer", "buffer_bytes", "schedule", "ocs_folds", "ocs_multiplicity",
                "write_responses", "credit_protocol_s", "spray", "phase_sync")


def params_from_network(network: Mapping[str, Any], latency: LatencyBudget) -> SimletteParams:
    """Simlette parameters; the endpoint split follows ``latency`` (Table 9, see params.py)."""
    buf = network.get("buffer_bytes", None)
    if buf is None and network.get("buffer") not in (None, "unlimited"):
        buf = network.get("buffer")
        if isinstance(buf, str):
            raise SpecError(f"network.buffer={buf!r} must be parsed to bytes at the config edge (or 'unlimited')")
    sink = (70 + 70) * 1e-9  # accelerator RX + L2->SM (Table 9 fixed terms)
    source = latency.endpoint_s - sink  # SM->L2 + TX + MMU/TLB
    kw = dict(mode=str(network.get("mode", "optimized")), buffer_bytes=None if buf is None else int(buf),
              source_latency_s=source, sink_latency_s=sink,
              write_responses=bool(network.get("write_responses", False)),
              spray=str(network.get("spray", "source")),
              phase_sync=str(network.get("phase_sync") or "auto"))
    if network.get("credit_protocol_s") is not None:
        kw["credit_protocol_s"] = float(network["credit_protocol_s"])
    return SimletteParams(**kw)


def simlette_from_config(fabric_numbers: Mapping[str, Any], network: Mapping[str, Any], *, world: int | None = None,
                         topology: CayleyTopology | None = None) -> SimletteNetwork:
    """A ready ``SimletteNetwork`` (call ``prepare`` next).

    fabric_numbers: ``kind`` (or ``name``) in single_eps | single_ocs | all_eps | hybrid | all_ocs, ``ports``,
      ``link_rate_Bps``, optional ``accelerators`` (or ``world``), ``latency_case``,
      ``switch_radix``/``down_ports``/``up_ports`` (two-level), optional latency overrides in seconds
      ``switch_core_s``, ``ocs_pass_through_s``, ``cable_s``, ``level2_cable_s``.
    network: ``mode`` (flit | optimized), ``buffer_bytes`` (int or None = unlimited), ``schedule``
      (force one), ``ocs_folds`` (list of masks, single_ocs), ``ocs_multiplicity`` (int),
      ``write_responses`` (bool), ``spray`` (source | message), ``phase_sync`` (auto | rank | group).
    topology: the Cayley topology fixed circuits of ``single_ocs`` realise (or ``ocs_folds`` /
      ``ocs_multiplicity``: hypercube plus those folds, multiplicity as given or as many as the ports
      allow). Without any of them, ``single_ocs`` - like ``all_ocs`` - gets its circuits from the
      shared-host plan of the deployment demand in ``prepare`` (as ``network=analytical``);
      ``hybrid`` gets its placement and rack circuits there too (``fabric.allocation`` /
      ``fabric.hop_latency_s`` as for the analytical model). On single_eps / all_eps, ``topology``
      is an optional logical overlay that groups of its size run their schedule on (the switch
      still routes every transfer in one hop, sprayed over all rails).
    """
    fab = dict(fabric_numbers)
    kind = fab.get("kind") or fab.get("name")
    if kind not in FABRIC_KINDS:
        raise SpecError(f"fabric {kind!r} is not known to Simlette; choose one of: {', '.join(FABRIC_KINDS)}")
    n = fab.get("accelerators") or fab.get("world") or world
    if n is None:
        raise SpecError("fabric.world (number of accelerators) is not set; give e.g. fabric.world=256")
    ports = int(fab["ports"])
    rate = float(fab.get("link_rate_Bps") or 5e10)
    # Table 9 case plus optional overrides already in seconds (the config edge parses "10ns")
    lat_kw = {k: float(fab[k]) for k in ("switch_core_s", "ocs_pass_through_s", "cable_s", "level2_cable_s")
              if fab.get(k) is not None}
    latency = LatencyBudget(case=fab.get("latency_case", "nominal"), **lat_kw)
    levels = FABRIC_KINDS[kind][0]
    spec_kw = dict(kind=kind, accelerators=int(n), ports=ports, link_rate_Bps=rate, latency=latency,
                   switch_radix=None if levels == 1 else int(fab.get("switch_radix", 72)))
    if levels == 2:
        spec_kw.update(down_ports=int(fab.get("down_ports", 32)), up_ports=int(fab.get("up_ports", 8)))
    spec = FabricSpec(**spec_kw)
    params = params_from_network(network, latency)
    phys = build_fabric(spec)
    schedule = network.get("schedule") or None
    fixed_circuits = topology is not None or bool(network.get("ocs_folds")) or network.get("ocs_multiplicity")
    if kind in ("hybrid", "all_ocs") or (kind == "single_ocs" and not fixed_circuits):
        # deployed fabrics: placement and circuits come from the deployment demand in prepare(),
        # planned exactly as the fabric-aware analytical model plans them (one shared code path)
        from fabrics.analytical import FabricAnalytical

        planner_lam = fab.get("hop_latency_s") if FABRIC_KINDS[kind][1] == "ocs" else None
        planner = FabricAnalytical(phys, schedule=schedule or "auto",
                                   planner_hop_latency_s=None if planner_lam is None else float(planner_lam),
                                   allocation=str(fab.get("allocation") or "shared_host"))
        return SimletteNetwork(None, params, ports=ports, rate_Bps=rate, schedule=schedule, planner=planner,
                               n_accelerators=int(n))
    if kind == "single_ocs":
        if topology is None:
            bits = int(n).bit_length() - 1
            if 1 << bits != int(n):
                raise SpecError(f"single_ocs needs a power-of-two number of accelerators for its Cayley circuits, got {n}")
            folds = tuple(parse_mask(m, bits) for m in (network.get("ocs_folds") or ()))
            base = hypercube(bits)
            degree = bits + len(folds)
            mult = network.get("ocs_multiplicity") or max(1, ports // degree)
            topology = CayleyTopology(n_bits=bits, generators=base.generators + folds, multiplicity=int(mult),
                                      name=f"Q{bits}" + "".join(f"+{m:b}" for m in folds))
        sim_fabric = OcsFabric(phys, topology, params)
    else:
        sim_fabric = EpsFabric(phys, params)
    return SimletteNetwork(sim_fabric, params, ports=ports, rate_Bps=rate,
                           eps_hop_latency_s=latency.switched_hop_s if kind == "single_eps" else None,
                           schedule=schedule,
                           logical_topology=topology if isinstance(sim_fabric, EpsFabric) else None)


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
    report = net.report()
    return {
        "completion_s": done[0].end_s - done[0].start_s,
        "schedule": done[0].schedule,
        "sim_wall_s": wall,
        "events": report["events"],
        "simlette": report,
    }
