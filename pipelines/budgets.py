"""Budgets before work: each pipeline estimates its size from the config and refuses what is too big.

A pipeline task calls ``enforce("<pipeline>", cfg)`` first. The estimator reads a few numbers of
the config (ranks, ports, group sizes, buffer sizes) and returns an ``Estimate`` of the run:
ranks, rank pairs (the dense ranks x ranks matrices), schedule transfers, simulator events and
working memory. It never builds what it estimates, so it costs microseconds. An estimate over
the ``budget`` group's limits (conf/budget/default.yaml) is one line - the limit, the estimate,
what drives it and how to raise it - and exit code 2 through ``pipelines.app``.

The memory coefficients are measured on this code (peak RSS or tracemalloc peak over the
interpreter's baseline), rounded up; docs/budgets-and-outputs.md lists the measurements. They
are estimates, meant to tell a run of minutes and megabytes from one of hours and terabytes,
not to predict the peak to the byte.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, Callable

from collectives.errors import SpecError
from pipelines.units import parse_bytes, parse_count

# --- measured coefficients (docs/budgets-and-outputs.md) ----------------------------------------------
BYTES_PER_CABLE = 700  # fabrics.physical.build_fabric: 630-680 B per cable (devices, cables, graph), tracemalloc
BYTES_PER_EPS_PAIR = 160  # all-pairs native pricing (fabrics.native/phase_pricing): 10.7 GB at a 8192-rank group
BYTES_PER_OCS_PAIR = 16  # fabrics.phase_pricing._init_ocs: circuits (int64) + latency (float64) per ordered pair
BYTES_PER_HYBRID_CELL = 8  # fabrics.phase_pricing._init_hybrid: the dense (racks², racks²) share matrix
BYTES_PER_A2AV_RANK = 4 * 2**20  # pipelines.alltoallv, VarioPath: 33-444 MB over the baseline at 16-128 ranks
BYTES_PER_A2AV_PAIR = 64  # demand, channel and evaluator matrices (int64/float64) per ordered rank pair
BYTES_PER_VERIFY_BLOCK = 400  # collectives.verify on alltoall: 3.7 GB at 1024 ranks x 10 phases (n² blocks)
BYTES_PER_VERIFY_TRANSFER = 700  # collectives.verify: one Transfer object and its bookkeeping
BYTES_PER_ROUTING_TOKEN_EXPERT = 12  # gxnet.routing._draw: float32 keys + int64 argpartition, tokens x experts
BYTES_PER_REPLAY_RANK = 400 * 2**20  # one spawned torch process (interpreter + torch + gloo), peak RSS
DL_FLIT_BYTES = 640  # fabrics.simlette.params.DL_FLIT_BYTES: Simlette's switching granularity


@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    """Upper limits of one run (conf/budget/default.yaml); every field > 0."""

    max_ranks: int = 65536
    max_rank_pairs: int = 2**26
    max_transfers: int = 2**24
    max_events: int = 50_000_000
    max_memory_bytes: int = 8 * 2**30

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise SpecError(f"budget.{_key(f.name)}={v!r} must be a positive whole number")


@dataclass(frozen=True, slots=True, kw_only=True)
class Estimate:
    """The size of one run; ``drivers`` names the config values the size comes from."""

    ranks: int = 0
    rank_pairs: int = 0
    transfers: int = 0
    events: int = 0
    memory_bytes: int = 0
    drivers: str = ""


# Budget field -> (Estimate field, what it counts); checked in this order, the first over its limit is reported.
_CHECKS = (("max_ranks", "ranks", "ranks"), ("max_rank_pairs", "rank_pairs", "rank pairs (ranks²)"),
           ("max_transfers", "transfers", "transfers"), ("max_events", "events", "simulator events"),
           ("max_memory_bytes", "memory_bytes", "memory"))


def _key(field_name: str) -> str:
    """The config key of a Budget field: ``max_memory_bytes`` is written ``budget.max_memory`` (with units)."""
    return "max_memory" if field_name == "max_memory_bytes" else field_name


def budget_of(cfg: Any) -> Budget:
    """The ``budget`` group of ``cfg`` (defaults where absent); limits accept SI/binary suffixes."""
    node = _get(cfg, "budget") or {}
    if not hasattr(node, "items"):
        raise SpecError(f"budget={node!r} must be a group of limits, e.g. budget.max_ranks=131072")
    known = {_key(f.name): f.name for f in fields(Budget)}
    kwargs = {}
    for key, value in dict(_plain(node)).items():
        if key not in known:
            raise SpecError(f"budget.{key} is not a budget; use one of: {', '.join(known)}")
        if value is None:
            continue
        kwargs[known[key]] = (parse_bytes(value, f"budget.{key}") if key == "max_memory"
                              else parse_count(value, f"budget.{key}"))
    return Budget(**kwargs)


def check(pipeline: str, estimate: Estimate, budget: Budget) -> None:
    """Raise one ``SpecError`` line naming the first limit the estimate exceeds (and how to raise every one)."""
    over = [(name, what, getattr(budget, name), getattr(estimate, est)) for name, est, what in _CHECKS
            if getattr(estimate, est) > getattr(budget, name)]
    if not over:
        return
    name, what, limit, value = over[0]
    shown = _gib(value) if name == "max_memory_bytes" else f"{value:,}"
    raises = " ".join(f"budget.{_key(n)}={_config_value(n, v)}" for n, _, _, v in over)
    raise SpecError(f"gx {pipeline} would need about {shown} {what} ({estimate.drivers}), over the budget "
                    f"budget.{_key(name)}={_config_value(name, limit, exact=True)}; make the run smaller, or raise "
                    f"the limit{'s' if len(over) > 1 else ''} with {raises}")


def _config_value(name: str, value: int, exact: bool = False) -> str:
    """A limit as it is written in the config: bytes in GiB (rounded up unless ``exact``), counts as powers of two."""
    if name == "max_memory_bytes":
        return f"{value / 2**30:g}GiB" if exact else f"{math.ceil(value / 2**30)}GiB"
    return str(value) if exact else str(1 << (value - 1).bit_length())


def enforce(pipeline: str, cfg: Any) -> Estimate:
    """Estimate the run of ``pipeline`` from ``cfg`` and refuse it when it is over the budget."""
    estimate = ESTIMATORS[pipeline](cfg)
    check(pipeline, estimate, budget_of(cfg))
    return estimate


# --- reading the config without building anything --------------------------------------------------

def _plain(node: Any) -> Any:
    from pipelines.specs import plain

    return plain(node)


def _get(cfg: Any, key: str, default: Any = None) -> Any:
    try:
        v = cfg.get(key, default) if hasattr(cfg, "get") else default
    except Exception:  # omegaconf missing values: the pipeline's own check reports them
        return default
    return default if v is None else v


def _count(value: Any, default: int = 0) -> int:
    """A count from the config, or ``default`` when it is not one (the pipeline reports that itself)."""
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    try:
        return parse_count(value, "count")
    except (SpecError, TypeError, ValueError, OverflowError):
        return default


def _size(value: Any, default: int = 0) -> int:
    if isinstance(value, (list, tuple)) or (hasattr(value, "__iter__") and not isinstance(value, (str, bytes))):
        return max((_size(v) for v in value), default=default)
    text = str(value)
    if ".." in text:  # a collective size range LO..HI[*F]: its largest size
        return _size(text.split("..", 1)[1].split("*", 1)[0], default)
    try:
        return parse_bytes(value, "size")
    except (SpecError, TypeError, ValueError, OverflowError):
        return default


def _gib(n: float) -> str:
    return f"{n / 2**30:,.1f} GiB" if n >= 2**28 else f"{n / 2**20:,.1f} MiB"


# --- scale-up fabrics: decode, search, collective fabric=... ------------------------------------------

def _fabric_memory(fab: dict, accelerators: int, ports: int, largest_group: int) -> tuple[int, str]:
    """Bytes of the physical fabric (cables) and of pricing a collective over ``largest_group`` ranks."""
    kind = str(fab.get("name", "all_eps"))
    down = max(1, _count(fab.get("down_ports"), 32))
    up = max(1, _count(fab.get("up_ports"), 32 if kind == "all_ocs" else 8))
    racks = -(-accelerators // down)
    two_level = kind in ("all_eps", "hybrid", "all_ocs")
    cables = accelerators * ports + (racks * ports * up if two_level else 0)
    memory = BYTES_PER_CABLE * cables
    if kind in ("single_ocs", "all_ocs"):
        memory += BYTES_PER_OCS_PAIR * accelerators**2
    else:
        memory += BYTES_PER_EPS_PAIR * largest_group**2
    if kind == "hybrid":
        memory += BYTES_PER_HYBRID_CELL * racks**4
    return memory, f"{accelerators:,} accelerators x {ports} ports of {kind} cables, a {largest_group:,}-rank group priced"


def _ports(cfg: Any, fab: dict, default: int = 36) -> int:
    ports = fab.get("ports")
    if ports is None:
        ports = (_plain(_get(cfg, "accelerator")) or {}).get("scaleup_ports", default)
    return max(1, _count(ports, default))


def _simlette_events(fab: dict, network: dict, groups: int, group: int, payload_bytes: int) -> int:
    """Simlette events of an all-pairs two-phase schedule (the most transfers a native schedule has):
    one event per message share per hop (optimized: at most one share per rail) or per DL flit (flit)."""
    if str(network.get("name", "analytical")) != "simlette" or group < 2:
        return 0
    hops = 4 if str(fab.get("name")) in ("all_eps", "hybrid", "all_ocs") else 2
    flits = max(1, -(-max(1, payload_bytes // group) // DL_FLIT_BYTES))
    units = flits if network.get("mode") == "flit" else min(flits, max(1, _count(fab.get("ports"), 36)))
    return groups * 2 * group * (group - 1) * hops * units


def decode_estimate(cfg: Any) -> Estimate:
    fab = dict(_plain(_get(cfg, "fabric")) or {})
    if fab.get("name") == "pcie":
        return pcie_phase_estimate(cfg, tokens=_count(_get(cfg, "batch"), 1),
                                   ep=_count(_get(cfg, "ep") or (_plain(_get(cfg, "parallel")) or {}).get("ep"), 1))
    world = _count(_get(cfg, "world"), 1)
    accelerators = max(world, _count(fab.get("accelerators"), world))
    memory, drivers = _fabric_memory(fab, accelerators, _ports(cfg, fab), world)
    network = dict(_plain(_get(cfg, "network")) or {})
    layers = max(1, _count((_plain(_get(cfg, "model")) or {}).get("layers"), 1))
    # the world-wide all-reduce of attention and the LM head (paper 003, Table 1: 4-400 KiB per call)
    events = _simlette_events(fab, network, 1, world, 400 * 2**10) * (1 + min(layers, 2))
    return Estimate(ranks=accelerators, rank_pairs=world**2, memory_bytes=memory, events=events,
                    drivers=f"world={world:,}: {drivers}")


def collective_estimate(cfg: Any) -> Estimate:
    size = _size(_get(cfg, "size"), 4096)
    if _get(cfg, "fabric") is not None:
        fab = dict(_plain(_get(cfg, "fabric")) or {})
        world = _count(fab.get("world"), 0) or _count(fab.get("accelerators"), 2)
        group = _count(_get(cfg, "group_size"), world) or world
        accelerators = max(world, _count(fab.get("accelerators"), world))
        memory, drivers = _fabric_memory(fab, accelerators, _ports(cfg, fab), group)
        events = _simlette_events(fab, dict(_plain(_get(cfg, "network")) or {}), max(1, world // max(1, group)),
                                  group, size)
        return Estimate(ranks=accelerators, rank_pairs=group**2, memory_bytes=memory, events=events,
                        drivers=f"fabric.world={world:,}: {drivers}")
    n = _topology_ranks(dict(_plain(_get(cfg, "topology")) or {}))
    dims = max(1, (n - 1).bit_length())
    transfers = memory = 0
    if _get(cfg, "verify", False):  # the data-flow verifier executes the schedule on numpy buffers
        transfers = n * dims * dims
        memory = BYTES_PER_VERIFY_TRANSFER * transfers
        if "alltoall" in str(_get(cfg, "collective", "allreduce")):
            memory += BYTES_PER_VERIFY_BLOCK * n * n * dims
    return Estimate(ranks=n, transfers=transfers, memory_bytes=memory,
                    drivers=f"a {n:,}-rank {_get(_get(cfg, 'topology') or {}, 'kind', 'hypercube')} topology"
                            + (" verified" if transfers else ""))


def _topology_ranks(t: dict) -> int:
    if t.get("ranks") is not None:
        return max(1, _count(t["ranks"], 1))
    kind = str(t.get("kind", "hypercube"))
    if kind in ("ring", "circulant"):
        return max(1, _count(t.get("n"), 1))
    if kind == "block_fold":
        return math.prod(1 << max(0, _count(b, 0)) for b in (t.get("blocks") or [])) or 1
    dims = _count(t.get("dims"), 1)
    return 1 << min(max(dims, 0), 62)


# --- PCIe clusters: alltoallv, prefill, decode fabric=pcie ----------------------------------------------

def _gpus_per_node(platform: Any) -> int:
    if isinstance(platform, str) or platform is None:
        from pathlib import Path

        from pipelines.app import CONF_DIR

        path = Path(CONF_DIR) / "platform" / f"{platform or 'r5080_bf3'}.yaml"
        if not path.is_file():
            return 8
        import yaml

        platform = yaml.safe_load(path.read_text()) or {}
    return max(1, _count(dict(platform).get("gpus_per_node"), 8))


def _alltoallv_memory(ranks: int) -> int:
    return BYTES_PER_A2AV_RANK * ranks + BYTES_PER_A2AV_PAIR * ranks**2


def alltoallv_estimate(cfg: Any) -> Estimate:
    nodes = _count(_get(cfg, "nodes", 1), 1)
    ranks = nodes * _gpus_per_node(_plain(_get(cfg, "platform")))
    schedulers = max(1, len(_plain(_get(cfg, "schedulers")) or []))
    return Estimate(ranks=ranks, rank_pairs=ranks**2, memory_bytes=_alltoallv_memory(ranks),
                    drivers=f"nodes={nodes:,} x {ranks // max(1, nodes)} GPUs = {ranks:,} ranks, "
                            f"{schedulers} scheduler(s)")


def pcie_phase_estimate(cfg: Any, *, tokens: int, ep: int) -> Estimate:
    """An EP phase on a PCIe cluster: routing draws (tokens x experts per layer) and AlltoAllv on ``ep`` ranks."""
    fab = dict(_plain(_get(cfg, "fabric")) or {})
    nodes = _count(_get(cfg, "nodes") or fab.get("nodes"), 1)
    platform = _get(cfg, "platform") or fab.get("platform")
    ranks = max(ep, nodes * _gpus_per_node(_plain(platform)))
    experts = max(1, _count((_plain(_get(cfg, "model")) or {}).get("experts"), 256))
    memory = _alltoallv_memory(ranks) + BYTES_PER_ROUTING_TOKEN_EXPERT * tokens * experts + tokens * ep
    return Estimate(ranks=ranks, rank_pairs=ranks**2, memory_bytes=memory,
                    drivers=f"EP{ep:,} on {ranks:,} PCIe ranks, {tokens:,} tokens x {experts} experts routed")


def prefill_estimate(cfg: Any) -> Estimate:
    phase = str(_get(cfg, "phase", "prefill"))
    requests = _count(_get(cfg, "requests", 1), 1)
    tokens = requests * (_count(_get(cfg, "prompt_tokens", 8192), 1) if phase == "prefill" else 1)
    points = _plain(_get(cfg, "points")) or []
    eps = [_count(dict(p).get("ep"), 1) for p in points if hasattr(p, "get")] or [_count(_get(cfg, "ep"), 1)]
    fab = dict(_plain(_get(cfg, "fabric")) or {})
    if fab.get("name") != "pcie":  # an EP phase on a scale-up fabric: the fabric's estimate at world = EP
        ep = max(eps)
        memory, drivers = _fabric_memory(fab, max(ep, _count(fab.get("accelerators"), ep)), _ports(cfg, fab), ep)
        return Estimate(ranks=ep, rank_pairs=ep**2, memory_bytes=memory, drivers=f"EP{ep:,}: {drivers}")
    return max((pcie_phase_estimate(cfg, tokens=tokens, ep=ep) for ep in eps), key=lambda e: e.memory_bytes)


# --- the others -------------------------------------------------------------------------------------------

def world_estimate(cfg: Any) -> Estimate:
    """splits, demand, plan: formulas over the world's divisors and the meshes' axes."""
    world = _count(_get(cfg, "world"), 1)
    return Estimate(ranks=world, drivers=f"world={world:,}")


def search_estimate(cfg: Any) -> Estimate:
    """Every split is timed on one network model built once: the decode estimate of the cell."""
    return decode_estimate(cfg)


def replay_estimate(schedule: dict, cfg: Any) -> Estimate:
    """A replay from its (validated) schedule: one process per rank with send, receive and check buffers."""
    world = int(schedule["world_size"])
    total = sum(int(x) for row in schedule["demand_bytes"] for x in row)
    activations = len(schedule.get("activations") or ())
    spawn = str(_get(cfg, "launcher", "spawn")) == "spawn" and _get(cfg, "reports") is None
    memory = 3 * total + (BYTES_PER_REPLAY_RANK * world if spawn else 0)
    return Estimate(ranks=world, rank_pairs=world**2, transfers=activations, memory_bytes=memory,
                    drivers=f"a schedule of {world:,} ranks, {activations:,} activations, {total:,} B"
                            + (", one process per rank on this host" if spawn else ""))


ESTIMATORS: dict[str, Callable[[Any], Estimate]] = {
    "decode": decode_estimate, "search": search_estimate, "collective": collective_estimate,
    "alltoallv": alltoallv_estimate, "prefill": prefill_estimate,
    "plan": world_estimate, "splits": world_estimate, "demand": world_estimate,
}


def preflight(pipeline: str, cfg: Any) -> Estimate:
    """Before any work: the data files the config names can be read, and the run fits the budget."""
    from pipelines.file_checks import check_input_files

    check_input_files(cfg)
    return enforce(pipeline, cfg)
