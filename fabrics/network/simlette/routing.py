"""Simlette layers 1 and 4 (paper 003, Appendix C.1): the physical topology as simulator links,
and routing onto it - both taken from ``fabrics.scaleup.physical`` and ``fabrics.scaleup``.

Simulator links are directed and carry their own serializer (the output port that drives
them) and a receive buffer at their far end (the credits of Section 5.2). A simulator link is
identified by the ``fabrics.scaleup.physical`` link id of the port that drives it. Each link has:

* ``rate_Bps`` - serialization rate of the port;
* ``after_s`` - deferred latency from the end of serialization on this link to the moment the
  data is ready at the next stage (C.5): the cable(s), plus the forwarding latency of the switch
  it enters (EPS 300 ns), or, on the last link of a path, the destination's sink latency;
* ``credit_return_s`` - how long a freed buffer slot takes to get back to the sender.

An OCS has no buffer and no serializer (a passive pass-through, Section 3): the physical links
from a port through one or more OCS devices to the next EPS or accelerator form **one**
simulator link, keyed by its first physical link, whose ``after_s`` adds every cable and every
10 ns pass-through on the way. Circuits are dedicated, so that first link fixes the whole segment.

Routing (layer 4) is ``fabrics.scaleup.paths.RoutedFabric.paths`` - the same paths the analytical
fabric model prices:

* **EPS** (``single_eps``, ``all_eps``, level 1 of ``hybrid``): dynamic routing with packet
  spraying over every rail and, between racks, every uplink (all-EPS) or every shortest rack
  circuit route (hybrid, relayed by level-1 EPS). Paths depend only on (rack of src, rack of dst)
  apart from the first and last link, so they are asked from ``RoutedFabric`` once per rack pair
  and completed with the source's and destination's rail links (enumerating 288 paths per
  accelerator pair would cost more than the simulation). Alternatives are ordered rail-minor
  (choice c uses rail c mod L), so round-robin spraying changes rail with every flit.
* **OCS** (``single_ocs``, ``all_ocs``): workload-static circuits (``configure_ocs``); a transfer
  a -> b is sprayed over the circuits from a to b (its multiplicity). A pair without a circuit has
  no path (relaying is the schedule's business).

Endpoints are *ranks* of the routed fabric's allocation (rank r on accelerator
``allocation.accelerators[r]``, layer 2); the simulator never needs accelerator ids.
"""

from __future__ import annotations

from collectives.errors import SpecError
from collectives.topology import CayleyTopology
from fabrics.scaleup.physical import ACCELERATOR, EPS, OCS, PhysicalFabric
from fabrics.scaleup.allocation import linear_allocation
from fabrics.scaleup.ocs_configuration import configure_ocs, xor_port_permutations
from fabrics.scaleup.paths import RoutedFabric, route
from fabrics.network.simlette.params import SimletteParams


class SimFabric:
    """Simulator links plus the routing function ``path(src, dst, choice)``."""

    def __init__(self, *, kind: str, n_accelerators: int, rate_Bps: list[float], after_s: list[float],
                 credit_return_s: list[float], names: list[str]):
        self.kind = kind  # "eps" | "ocs"
        self.n_accelerators = n_accelerators
        self.rate_Bps = rate_Bps
        self.after_s = after_s
        self.credit_return_s = credit_return_s
        self.names = names

    @property
    def n_links(self) -> int:
        return len(self.rate_Bps)

    # routing interface, specialised by subclasses
    def n_paths(self, src: int, dst: int) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def path(self, src: int, dst: int, choice: int) -> tuple[int, ...]:  # pragma: no cover - abstract
        raise NotImplementedError

    def spray_key(self, src: int, dst: int):
        return src

    def paths(self, src: int, dst: int, first: int, k: int) -> list[tuple[int, ...]]:
        """Paths ``first, first + 1, ...`` (k of them, modulo the number of paths): one spray round."""
        n = self.n_paths(src, dst)
        return [self.path(src, dst, (first + i) % n) for i in range(k)]


class RoutedSimFabric(SimFabric):
    """Simulator links and paths of a ``fabrics.scaleup.paths.RoutedFabric`` (any of the five fabrics)."""

    def __init__(self, routed: RoutedFabric, params: SimletteParams):
        phys = routed.fabric
        spec = phys.spec
        devices = phys.devices
        self.routed = routed
        self.phys = phys
        self._sink_s = params.sink_latency_s
        self._protocol_s = params.credit_protocol_s
        rate, after, ret, names = [], [], [], []
        for link in phys.links:
            dst = devices[link.dst]
            rate.append(float(link.rate_Bps))
            # links into an OCS get their after_s when a circuit through it is first routed
            after.append(link.latency_s + (self._sink_s if dst.kind == ACCELERATOR else dst.forwarding_latency_s))
            ret.append(params.credit_protocol_s + link.latency_s)
            names.append(f"{_dev(devices[link.src])}:{link.src_port}->{_dev(dst)}:{link.dst_port}")
        self._segment_seen: set[int] = set()
        super().__init__(kind="ocs" if spec.level1_kind == OCS else "eps", n_accelerators=routed.allocation.world,
                         rate_Bps=rate, after_s=after, credit_return_s=ret, names=names)
        self.levels = spec.levels
        self.L = spec.ports
        acc = routed.allocation.accelerators
        self._acc = acc
        if self.kind == "eps":
            out = phys.out_link
            down = spec.rack_size
            self._rack = [a // down for a in acc]
            self.up = [[out[(a, j)] for j in range(self.L)] for a in acc]  # rank -> its port on rail j
            self.down = [[out[(phys.level1[a // down][j], a % down if spec.levels == 2 else a)] for a in acc]
                          for j in range(self.L)]  # rail j -> the last link into rank
            self._rank_in_rack: dict[int, list[int]] = {}
            for r, rk in enumerate(self._rack):
                self._rank_in_rack.setdefault(rk, []).append(r)
            self._middles: dict[tuple[int, int], tuple[tuple[int, tuple[int, ...]], ...]] = {}
        else:
            self._circuits: dict[tuple[int, int], tuple[tuple[int], ...]] = {}

    # --- segments through OCS devices ----------------------------------------------------------
    def _collapse(self, links: tuple[int, ...]) -> tuple[int, ...]:
        """Physical links -> simulator links: a run of links through OCS devices is one link."""
        phys_links, devices = self.phys.links, self.phys.devices
        out: list[int] = []
        i = 0
        while i < len(links):
            first = links[i]
            if first in self._segment_seen or devices[phys_links[first].dst].kind != OCS:
                out.append(first)
                i += 1
                while i < len(links) and devices[phys_links[links[i]].src].kind == OCS:
                    i += 1
                continue
            optical = 0.0
            while True:
                link = phys_links[links[i]]
                optical += link.latency_s
                dst = devices[link.dst]
                i += 1
                if dst.kind != OCS:
                    break
                optical += dst.forwarding_latency_s  # pass-through
            self.after_s[first] = optical + (self._sink_s if dst.kind == ACCELERATOR else dst.forwarding_latency_s)
            self.credit_return_s[first] = self._protocol_s + optical
            self._segment_seen.add(first)
            out.append(first)
        return tuple(out)

    # --- routing ---------------------------------------------------------------------------------
    def _rack_middles(self, rs: int, rd: int):
        """(rail, middle links) of every alternative between racks rs and rd, rail-minor order."""
        key = (rs, rd)
        hit = self._middles.get(key)
        if hit is not None:
            return hit
        src = self._rank_in_rack[rs][0]
        dst = next((r for r in self._rank_in_rack[rd] if r != src), None)
        if dst is None:  # a rack holding one rank of the deployment: nothing to route inside it
            self._middles[key] = ()
            return ()
        by_rail: dict[int, list[tuple[int, ...]]] = {}
        for p in self.routed.paths(src, dst):
            j = self.phys.links[p.links[0]].src_port
            by_rail.setdefault(j, []).append(self._collapse(p.links)[1:-1])
        per_rail = {len(v) for v in by_rail.values()}
        if len(by_rail) != self.L or len(per_rail) != 1:
            raise SpecError(f"racks {rs} -> {rd}: EPS paths must exist on every rail alike; got {sorted(per_rail)} per rail")
        k = per_rail.pop()
        hit = tuple((j, by_rail[j][i]) for i in range(k) for j in range(self.L))
        self._middles[key] = hit
        return hit

    def _ocs_paths(self, src: int, dst: int) -> tuple[tuple[int], ...]:
        key = (src, dst)
        hit = self._circuits.get(key)
        if hit is None:
            hit = self._circuits[key] = tuple(self._collapse(p.links) for p in self.routed.paths(src, dst))
        return hit

    def n_paths(self, src: int, dst: int) -> int:
        # hot: called once per injected message (the engine asks path() only after this)
        if self.kind == "eps":
            key = (self._rack[src], self._rack[dst])
            m = self._middles.get(key)
            if m is None:
                m = self._rack_middles(*key)
            n = len(m)
        else:
            n = len(self._ocs_paths(src, dst))
        if n == 0:
            a, b = self._acc[src], self._acc[dst]
            if self.kind == "ocs":
                raise SpecError(
                    f"no OCS circuit connects rank {src} (accelerator {a}) to rank {dst} (accelerator {b}) on "
                    f"{self.phys.spec.kind} (mask {a ^ b}); the schedule needs that generator: plan it or relay"
                )
            raise SpecError(
                f"no path from rank {src} (accelerator {a}) to rank {dst} (accelerator {b}) on {self.phys.spec.kind}; "
                "the rack circuits must connect every pair of racks the deployment uses"
            )
        return n

    def path(self, src: int, dst: int, choice: int) -> tuple[int, ...]:
        if self.kind == "eps":
            key = (self._rack[src], self._rack[dst])
            m = self._middles.get(key)
            if m is None:
                m = self._rack_middles(*key)
            j, middle = m[choice]
            if middle:
                return (self.up[src][j],) + middle + (self.down[j][dst],)
            return (self.up[src][j], self.down[j][dst])
        return self._ocs_paths(src, dst)[choice]

    def paths(self, src: int, dst: int, first: int, k: int) -> list[tuple[int, ...]]:
        # hot: one call per injected message (path() per flit share would cost a call each)
        if self.kind != "eps":
            circuits = self._ocs_paths(src, dst)
            n = len(circuits)
            return [circuits[(first + i) % n] for i in range(k)]
        m = self._middles[(self._rack[src], self._rack[dst])]  # filled by n_paths
        n = len(m)
        up, down = self.up[src], self.down
        out = []
        for i in range(k):
            j, middle = m[(first + i) % n]
            out.append((up[j],) + middle + (down[j][dst],) if middle else (up[j], down[j][dst]))
        return out

    def spray_key(self, src: int, dst: int):
        # EPS: one round-robin pointer per source (dynamic routing); OCS: per circuit bundle
        return src if self.kind == "eps" else (src, dst)


class EpsFabric(RoutedSimFabric):
    """Single- or two-level EPS (rank r on accelerator r) with packet spraying over every rail and uplink."""

    def __init__(self, phys: PhysicalFabric, params: SimletteParams):
        spec = phys.spec
        if spec.level1_kind != EPS or (spec.levels == 2 and spec.level2_kind != EPS):
            raise SpecError(f"fabric {spec.kind!r} is not all-EPS; hybrid and OCS fabrics get their circuits "
                            "from the deployment (SimletteNetwork.prepare)")
        super().__init__(route(phys, linear_allocation(spec.accelerators)), params)


class OcsFabric(RoutedSimFabric):
    """Single-level OCS whose circuits realise one given Cayley topology on the accelerator labels
    (rank r on accelerator r): generator mask g with multiplicity p takes p rails, and on each of
    them the OCS connects every a to a XOR g (``xor_port_permutations`` + ``configure_ocs``)."""

    def __init__(self, phys: PhysicalFabric, circuits: CayleyTopology, params: SimletteParams):
        spec = phys.spec
        if spec.levels != 1 or spec.level1_kind != OCS:
            raise SpecError(f"fabric {spec.kind!r} is not single_ocs; a fixed Cayley topology is for single_ocs "
                            "(two-level OCS circuits come from the deployment's plan)")
        n = spec.accelerators
        masks = circuits.generators
        mult = circuits.multiplicity
        mult = (mult,) * len(masks) if isinstance(mult, int) else tuple(mult)
        if sum(mult) > spec.ports:
            raise SpecError(
                f"ocs topology {circuits.describe()} needs {sum(mult)} ports per accelerator (sum of multiplicities) "
                f"but fabric.ports={spec.ports}; drop folds or multiplicity, or raise fabric.ports"
            )
        if circuits.n_ranks != n:
            raise SpecError(
                f"ocs topology {circuits.describe()} has {circuits.n_ranks} ranks but the fabric has {n} accelerators; "
                "set fabric.accelerators (world) to 2^n_bits"
            )
        alloc = linear_allocation(n)
        perms = xor_port_permutations(n, dict(zip(masks, mult)), spec.ports)
        super().__init__(route(phys, alloc, configure_ocs(phys, alloc, perms)), params)
        self.topology = circuits
        self.multiplicity = dict(zip(masks, mult))


def _dev(d) -> str:
    if d.kind == ACCELERATOR:
        return f"acc{d.id}"
    return f"{d.kind}{d.level}.{d.rail}" + (f".{d.uplink}" if d.uplink >= 0 else f".r{d.rack}" if d.level == 1 and d.rack > 0 else "")
