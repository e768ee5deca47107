"""Simlette layers 1 and 4 (paper 003, Appendix C.1): the physical topology as simulator links,
and routing onto it.

Simulator links are directed and carry their own serializer (the output port that drives
them) and a receive buffer at their far end (the credits of Section 5.2). Each link has:

* ``rate_Bps`` - serialization rate of the port;
* ``after_s`` - deferred latency from the end of serialization on this link to the moment the
  data is ready at the next stage (C.5): the cable(s), plus the forwarding latency of the switch
  it enters (EPS 300 ns), or, on the last link of a path, the destination's sink latency;
* ``credit_return_s`` - how long a freed buffer slot takes to get back to the sender.

Routing (layer 4):

* **EPS** (single- or two-level, ``fabrics.physical``): dynamic routing with packet spraying -
  every path through any rail (and, across racks, any uplink) is a candidate; the source
  sprays DL flits over them round-robin, one pointer per source (deterministic).
* **OCS** (single level): circuits realise a Cayley logical topology on the accelerator labels
  (Section 3.2): generator mask g with multiplicity p takes p rails, and on each of them the OCS
  connects every a to a XOR g (a perfect matching, Appendix A.1 "edge coloring"). The optical
  path a -> OCS -> b is one simulator link (no buffer or serializer inside an OCS): cable +
  pass-through (10 ns) + cable. A transfer a -> b uses the p circuits of mask a XOR b, sprayed
  round-robin per (a, b).

This duplicates a little of what a general ``fabrics.routing`` would provide (EPS path
enumeration; OCS circuits for one Cayley topology); it reads devices, links and latencies from
``fabrics.physical`` so the two stay consistent.
"""

from __future__ import annotations

from collectives.errors import SpecError
from collectives.topology import CayleyTopology
from fabrics.physical import ACCELERATOR, EPS, OCS, PhysicalFabric
from fabrics.simlette.params import SimletteParams


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


class EpsFabric(SimFabric):
    """Single- or two-level EPS with packet spraying over every rail (and uplink)."""

    def __init__(self, phys: PhysicalFabric, params: SimletteParams):
        spec = phys.spec
        if spec.level1_kind != EPS or (spec.levels == 2 and spec.level2_kind != EPS):
            raise SpecError(f"fabric {spec.kind!r} is not all-EPS; Simlette routes EPS fabrics here and single_ocs via circuits")
        devices = phys.devices
        rate, after, ret, names = [], [], [], []
        for link in phys.links:
            dst = devices[link.dst]
            rate.append(float(link.rate_Bps))
            after.append(link.latency_s + (params.sink_latency_s if dst.kind == ACCELERATOR else dst.forwarding_latency_s))
            ret.append(params.credit_protocol_s + link.latency_s)
            names.append(f"{_dev(devices[link.src])}:{link.src_port}->{_dev(dst)}:{link.dst_port}")
        super().__init__(kind="eps", n_accelerators=spec.accelerators, rate_Bps=rate, after_s=after,
                         credit_return_s=ret, names=names)
        out = phys.out_link
        L = spec.ports
        self.L = L
        self.levels = spec.levels
        # up[a][j]: accelerator a, port j -> its level-1 device of rail j
        self.up = [[out[(a, j)] for j in range(L)] for a in range(spec.accelerators)]
        if spec.levels == 1:
            sw = phys.level1[0]
            self.down = [[out[(sw[j], b)] for b in range(spec.accelerators)] for j in range(L)]
        else:
            self.rack_size = spec.down_ports
            self.uplinks = spec.up_ports
            # down[a][j]: level-1 device of rail j in a's rack -> a
            self.down = [[out[(phys.level1[a // spec.down_ports][j], a % spec.down_ports)] for a in range(spec.accelerators)]
                         for j in range(L)]
            self.l1_up = [[[out[(phys.level1[r][j], spec.down_ports + u)] for u in range(spec.up_ports)]
                           for j in range(L)] for r in range(spec.racks)]
            self.l2_down = [[[out[(phys.level2[j][u], r)] for r in range(spec.racks)] for u in range(spec.up_ports)]
                            for j in range(L)]

    def n_paths(self, src: int, dst: int) -> int:
        if self.levels == 1 or src // self.rack_size == dst // self.rack_size:
            return self.L
        return self.L * self.uplinks

    def path(self, src: int, dst: int, choice: int) -> tuple[int, ...]:
        if self.levels == 1:
            return (self.up[src][choice], self.down[choice][dst])
        rs, rd = src // self.rack_size, dst // self.rack_size
        if rs == rd:
            return (self.up[src][choice], self.down[choice][dst])
        j, u = choice % self.L, choice // self.L
        return (self.up[src][j], self.l1_up[rs][j][u], self.l2_down[j][u][rd], self.down[j][dst])


class OcsFabric(SimFabric):
    """Single-level OCS whose circuits realise one Cayley topology on the accelerator labels."""

    def __init__(self, phys: PhysicalFabric, circuits: CayleyTopology, params: SimletteParams):
        spec = phys.spec
        if spec.levels != 1 or spec.level1_kind != OCS:
            raise SpecError(f"fabric {spec.kind!r} is not single_ocs; Simlette builds circuits only on a single-level OCS")
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
        ocs = phys.level1[0]
        lat = spec.latency
        rate, after, ret, names = [], [], [], []
        self.circuits: dict[tuple[int, int], tuple[int, ...]] = {}
        rail = 0
        for mask, p in zip(masks, mult):
            for _ in range(p):
                dev = phys.devices[ocs[rail]]
                cable_in = phys.link_between(0, rail).latency_s
                cable_out = phys.link_between(ocs[rail], 0).latency_s
                optical = cable_in + dev.forwarding_latency_s + cable_out
                for a in range(n):
                    b = a ^ mask
                    self.circuits.setdefault((a, b), ())
                    self.circuits[(a, b)] += (len(rate),)
                    rate.append(float(spec.link_rate_Bps))
                    after.append(optical + params.sink_latency_s)
                    ret.append(params.credit_protocol_s + optical)
                    names.append(f"acc{a}:{rail}->ocs{rail}->acc{b}:{rail}")
                rail += 1
        super().__init__(kind="ocs", n_accelerators=n, rate_Bps=rate, after_s=after, credit_return_s=ret, names=names)
        self.topology = circuits
        self.multiplicity = dict(zip(masks, mult))
        del lat

    def n_paths(self, src: int, dst: int) -> int:
        try:
            return len(self.circuits[(src, dst)])
        except KeyError:
            raise SpecError(
                f"no OCS circuit connects accelerator {src} to {dst} (mask {src ^ dst}); the schedule needs "
                f"generator {src ^ dst}, add it to network.ocs_masks"
            ) from None

    def path(self, src: int, dst: int, choice: int) -> tuple[int, ...]:
        return (self.circuits[(src, dst)][choice],)

    def spray_key(self, src: int, dst: int):
        return (src, dst)


def _dev(d) -> str:
    if d.kind == ACCELERATOR:
        return f"acc{d.id}"
    return f"{d.kind}{d.level}.{d.rail}" + (f".{d.uplink}" if d.uplink >= 0 else f".r{d.rack}" if d.level == 1 and d.rack > 0 else "")
