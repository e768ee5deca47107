"""Physical scale-up fabrics as plain data (paper 003, Section 3, Appendix C.1 and C.7).

Every fabric is rail-optimised: port j of every accelerator attaches to the switching device(s)
of rail j, so the L ports of an accelerator reach L independent planes.

* **single-level** (``single_eps``, ``single_ocs``): one switching device per rail with one port
  per accelerator (Figure 3's "example single-level fabric"; its radix is N, not 72).
* **two-level** (``all_eps``, ``hybrid``, ``all_ocs``; Appendix C.7, Figure 25): accelerators
  sit in racks of ``down_ports`` (32); each rack has one level-1 device per rail (one chip of
  radix 72) with ``down_ports`` ports down and ``up_ports`` up (8 for the 4:1 EPS fabrics, 32 for
  the non-blocking all-OCS). Uplink u of rail j of every rack meets the others at the level-2
  *logical* switch (j, u), which has one port per rack (18 for 576 accelerators);
  ``switch_radix // racks`` logical switches share one level-2 chip (4 per 72-port chip).
  For 576 accelerators this gives 18 racks × 36 rails = 648 level-1 chips, and 36 × 8 = 288
  logical / 72 chips (all-EPS, hybrid) or 36 × 32 = 1152 logical / 288 chips (all-OCS) at
  level 2 — the counts of Figure 25 and Table 12.

Device ids: accelerators 0..N-1, then level-1 devices, then level-2 devices. Each physical cable
is bidirectional and yields two directed links (ids 2c and 2c+1). Cables between levels 1 and 2
are fiber (rack-to-rack distance, D.4); cables touching an OCS are fiber; the others copper.
OCS devices forward nothing until configured (see ``fabrics.scaleup.ocs_configuration``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Mapping, Sequence

from collectives.errors import SpecError
from collectives.registry import Registry
from fabrics.scaleup.latency import LatencyBudget

ACCELERATOR, EPS, OCS = "accelerator", "eps", "ocs"
SWITCH_KINDS = (EPS, OCS)

# name -> (levels, level-1 kind, level-2 kind)
FABRIC_KINDS: dict[str, tuple[int, str, str | None]] = {
    "single_eps": (1, EPS, None),
    "single_ocs": (1, OCS, None),
    "all_eps": (2, EPS, EPS),
    "hybrid": (2, EPS, OCS),
    "all_ocs": (2, OCS, OCS),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class FabricSpec:
    """What a user chooses: kind, sizes, radix, link rate (already parsed to numbers)."""

    kind: str
    accelerators: int
    ports: int  # L, ports per accelerator
    link_rate_Bps: float  # R, one direction of one port
    switch_radix: int | None = 72  # ports per switching chip; single-level: None = N
    down_ports: int = 32  # level-1 ports towards accelerators = rack size (two-level)
    up_ports: int = 8  # level-1 ports towards level 2 (4:1 with 32 down)
    latency: LatencyBudget = field(default_factory=LatencyBudget)

    def __post_init__(self) -> None:
        if self.kind not in FABRIC_KINDS:
            raise SpecError(f"fabric kind {self.kind!r} is unknown; choose one of: {', '.join(FABRIC_KINDS)}")
        for name in ("accelerators", "ports"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise SpecError(f"fabric.{name}={value!r} must be a positive integer")
        if self.accelerators < 2:
            raise SpecError(f"fabric.accelerators={self.accelerators} must be at least 2")
        if not isinstance(self.link_rate_Bps, (int, float)) or not self.link_rate_Bps > 0:
            raise SpecError(
                f"fabric.link_rate={self.link_rate_Bps!r} must be a positive rate in bytes/s "
                "(parse '400Gb/s' with pipelines.units.parse_rate first)"
            )
        if self.levels == 1:
            if self.switch_radix is not None and self.switch_radix < self.accelerators:
                raise SpecError(
                    f"fabric.switch_radix={self.switch_radix} cannot reach {self.accelerators} accelerators "
                    f"in one level ({self.kind}); set switch_radix to null (= accelerators) or use a "
                    "two-level fabric"
                )
            return
        for name in ("switch_radix", "down_ports", "up_ports"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise SpecError(f"fabric.{name}={value!r} must be a positive integer for {self.kind}")
        if self.accelerators % self.down_ports:
            raise SpecError(
                f"fabric.accelerators={self.accelerators} must be a multiple of down_ports={self.down_ports} "
                f"(the rack size of {self.kind}); change one of them"
            )
        if self.down_ports + self.up_ports > self.switch_radix:
            raise SpecError(
                f"level-1 switch needs down_ports+up_ports={self.down_ports + self.up_ports} ports but "
                f"switch_radix={self.switch_radix}; lower up_ports or raise switch_radix"
            )
        if self.racks > self.switch_radix:
            raise SpecError(
                f"{self.racks} racks do not fit one level-2 logical switch of radix {self.switch_radix}; "
                "use fewer accelerators or larger down_ports"
            )

    @property
    def levels(self) -> int:
        return FABRIC_KINDS[self.kind][0]

    @property
    def level1_kind(self) -> str:
        return FABRIC_KINDS[self.kind][1]

    @property
    def level2_kind(self) -> str | None:
        return FABRIC_KINDS[self.kind][2]

    @property
    def rack_size(self) -> int:
        return self.accelerators if self.levels == 1 else self.down_ports

    @property
    def racks(self) -> int:
        return self.accelerators // self.rack_size

    @property
    def oversubscription(self) -> float:
        """Level-1 down : up ratio (4.0 for the 4:1 EPS fabrics; 1.0 single-level)."""
        return 1.0 if self.levels == 1 else self.down_ports / self.up_ports


@dataclass(frozen=True, slots=True, kw_only=True)
class Device:
    id: int
    kind: str  # accelerator | eps | ocs
    level: int  # 0 accelerators, 1, 2
    ports: int  # ports this (logical) device uses
    forwarding_latency_s: float  # EPS: switch total; OCS: pass-through; accelerator: 0
    rack: int = -1  # accelerators and level-1 devices
    rail: int = -1  # switching devices
    uplink: int = -1  # level-2 logical switches: the uplink index u they join
    chip: int = -1  # switching chip this logical device lives on (per level)


@dataclass(frozen=True, slots=True, kw_only=True)
class Cable:
    """One bidirectional physical cable between port a_port of a and port b_port of b."""

    a: int
    a_port: int
    b: int
    b_port: int
    medium: str  # copper | fiber
    latency_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Link:
    """One direction of a cable: what a simulator serialises onto."""

    id: int
    src: int
    src_port: int
    dst: int
    dst_port: int
    rate_Bps: float
    latency_s: float
    medium: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ChipGroup:
    """Physical switching chips of one level (what the power model counts: every port)."""

    kind: str
    level: int
    chips: int
    ports_per_chip: int
    logical_per_chip: int

    @property
    def ports(self) -> int:
        return self.chips * self.ports_per_chip


@dataclass(frozen=True, slots=True, eq=False)
class PhysicalFabric:
    """Devices, cables (and their directed links), chips; plus port lookups for routing."""

    spec: FabricSpec
    devices: tuple[Device, ...]
    cables: tuple[Cable, ...]
    links: Sequence[Link]  # directed links, built when first read (a simulator, path tracing)
    chips: tuple[ChipGroup, ...]
    out_link: Mapping[tuple[int, int], int]  # (device, port) -> directed link leaving it (built with links)
    level1: tuple[tuple[int, ...], ...]  # [rack][rail] -> device id
    level2: tuple[tuple[int, ...], ...]  # [rail][uplink] -> device id (two-level only)

    @property
    def accelerators(self) -> int:
        return self.spec.accelerators

    @property
    def ports(self) -> int:
        return self.spec.ports

    def rack_of(self, accelerator: int) -> int:
        return accelerator // self.spec.rack_size

    def link_between(self, src: int, src_port: int) -> Link:
        return self.links[self.out_link[(src, src_port)]]

    def switch_devices(self, kind: str | None = None) -> list[Device]:
        return [d for d in self.devices if d.kind != ACCELERATOR and (kind is None or d.kind == kind)]

    def component_counts(self) -> dict[str, int]:
        """Counts from the construction (Figure 25): chips and ports per kind, cables per medium."""
        counts = {"accelerators": self.spec.accelerators, "eps_chips": 0, "ocs_chips": 0, "eps_ports": 0, "ocs_ports": 0}
        for group in self.chips:
            counts[f"{group.kind}_chips"] += group.chips
            counts[f"{group.kind}_ports"] += group.ports
        counts["copper_cables"] = sum(1 for c in self.cables if c.medium == "copper")
        counts["fiber_cables"] = sum(1 for c in self.cables if c.medium == "fiber")
        return counts

    def graph(self):
        """A ``networkx.MultiDiGraph`` view: nodes are devices, edges directed links (key = link id)."""
        import networkx as nx

        g = nx.MultiDiGraph()
        for d in self.devices:
            g.add_node(d.id, kind=d.kind, level=d.level, ports=d.ports, rack=d.rack, rail=d.rail,
                       forwarding_latency_s=d.forwarding_latency_s)
        for link in self.links:
            g.add_edge(link.src, link.dst, key=link.id, src_port=link.src_port, dst_port=link.dst_port,
                       rate_Bps=link.rate_Bps, latency_s=link.latency_s, medium=link.medium)
        return g


def _forwarding_latency_s(kind: str, latency: LatencyBudget) -> float:
    return latency.switch_total_s if kind == EPS else latency.ocs_pass_through_s


# FabricSpec -> PhysicalFabric: a fabric is a value of its frozen spec, and a search cell builds
# the same one for its network model and for its power (and every cell of the sweep on that
# fabric again). Explicit, keyed, bounded (least recently used out); build_fabric.cache_clear()
# is always safe.
@lru_cache(maxsize=4)
def build_fabric(spec: FabricSpec) -> PhysicalFabric:
    """The devices, cables and chips of ``spec`` (Appendix C.7), built once per spec and shared
    (a ``PhysicalFabric`` is immutable)."""
    return _construct(spec)


def _construct(spec: FabricSpec) -> PhysicalFabric:
    n, L, lat = spec.accelerators, spec.ports, spec.latency
    devices: list[Device] = [
        Device(id=a, kind=ACCELERATOR, level=0, ports=L, forwarding_latency_s=0.0, rack=a // spec.rack_size)
        for a in range(n)
    ]
    cables: list[Cable] = []
    k1 = spec.level1_kind

    def medium(a_kind: str, b_kind: str, between_levels: bool) -> str:
        return "fiber" if between_levels or OCS in (a_kind, b_kind) else "copper"

    level1: list[list[int]] = []
    level2: list[list[int]] = []
    chips: list[ChipGroup] = []
    if spec.levels == 1:
        radix = spec.switch_radix if spec.switch_radix is not None else n
        row = []
        for j in range(L):
            dev = Device(id=len(devices), kind=k1, level=1, ports=n, forwarding_latency_s=_forwarding_latency_s(k1, lat),
                         rack=0, rail=j, chip=j)
            devices.append(dev)
            row.append(dev.id)
            for a in range(n):
                cables.append(Cable(a=a, a_port=j, b=dev.id, b_port=a, medium=medium(ACCELERATOR, k1, False),
                                    latency_s=lat.cable_s))
        level1.append(row)
        chips.append(ChipGroup(kind=k1, level=1, chips=L, ports_per_chip=radix, logical_per_chip=1))
    else:
        k2 = spec.level2_kind
        down, up, racks = spec.down_ports, spec.up_ports, spec.racks
        for r in range(racks):
            row = []
            for j in range(L):
                dev = Device(id=len(devices), kind=k1, level=1, ports=down + up,
                             forwarding_latency_s=_forwarding_latency_s(k1, lat), rack=r, rail=j, chip=r * L + j)
                devices.append(dev)
                row.append(dev.id)
                for i in range(down):
                    a = r * down + i
                    cables.append(Cable(a=a, a_port=j, b=dev.id, b_port=i, medium=medium(ACCELERATOR, k1, False),
                                        latency_s=lat.cable_s))
            level1.append(row)
        chips.append(ChipGroup(kind=k1, level=1, chips=racks * L, ports_per_chip=spec.switch_radix, logical_per_chip=1))
        per_chip = spec.switch_radix // racks  # logical level-2 switches packed on one chip
        logical = 0
        for j in range(L):
            row = []
            for u in range(up):
                dev = Device(id=len(devices), kind=k2, level=2, ports=racks,
                             forwarding_latency_s=_forwarding_latency_s(k2, lat), rail=j, uplink=u,
                             chip=logical // per_chip)
                logical += 1
                devices.append(dev)
                row.append(dev.id)
                for r in range(racks):
                    cables.append(Cable(a=level1[r][j], a_port=down + u, b=dev.id, b_port=r,
                                        medium=medium(k1, k2, True), latency_s=lat.level2_cable_s))
            level2.append(row)
        chips.append(ChipGroup(kind=k2, level=2, chips=-(-logical // per_chip), ports_per_chip=spec.switch_radix,
                               logical_per_chip=per_chip))

    cables_t = tuple(cables)
    directed = Deferred(lambda: _directed_links(cables_t, float(spec.link_rate_Bps)))
    return PhysicalFabric(spec=spec, devices=tuple(devices), cables=cables_t,
                          links=LazySequence(lambda: directed()[0]), chips=tuple(chips),
                          out_link=LazyMapping(lambda: directed()[1]), level1=tuple(map(tuple, level1)),
                          level2=tuple(map(tuple, level2)))


def _directed_links(cables: tuple[Cable, ...], rate_Bps: float) -> tuple[tuple[Link, ...], dict[tuple[int, int], int]]:
    """Two directed links per cable (ids 2c and 2c+1) and the link leaving each (device, port)."""
    links: list[Link] = []
    out_link: dict[tuple[int, int], int] = {}
    for c in cables:
        for src, sp, dst, dp in ((c.a, c.a_port, c.b, c.b_port), (c.b, c.b_port, c.a, c.a_port)):
            out_link[(src, sp)] = len(links)
            links.append(Link(id=len(links), src=src, src_port=sp, dst=dst, dst_port=dp, rate_Bps=rate_Bps,
                              latency_s=c.latency_s, medium=c.medium))
    return tuple(links), out_link


class Deferred:
    """``build()``'s value, built on the first call and kept (what a fabric or a configuration
    can leave until someone reads it: a simulator's directed links, an OCS's cross-connects)."""

    __slots__ = ("_build", "_value")

    def __init__(self, build):
        self._build, self._value = build, None

    def __call__(self):
        if self._build is not None:
            self._value, self._build = self._build(), None
        return self._value


class _LazyView:
    """Read-only access to ``get()`` (a ``Deferred`` value), built on first use."""

    __slots__ = ("_get",)

    def __init__(self, get):
        self._get = get

    def __getitem__(self, key):
        return self._get()[key]

    def __len__(self) -> int:
        return len(self._get())

    def __iter__(self):
        return iter(self._get())


class LazySequence(_LazyView, Sequence):
    __slots__ = ()


class LazyMapping(_LazyView, Mapping):
    __slots__ = ()

    def get(self, key, default=None):
        return self._get().get(key, default)


# registry of the scale-up fabric kinds (option names of conf/fabric/)
FABRICS: Registry = Registry("fabric")
for _name in FABRIC_KINDS:
    FABRICS.add(_name, _name)
