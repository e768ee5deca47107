"""What each rank does when an AlltoAllv schedule is replayed (pure: no torch).

``plan_from_schedule(schedule_json)`` turns a ``gxnet.alltoallv.schedule/1`` document
(``AlltoallvSchedule.to_json``) into a ``ReplayPlan``: per activation, the lanes in one global
order (the order every rank posts its sends and receives in, so NCCL's in-order matching and
gloo's tags agree), and for every lane the *pieces* of its commodity it carries, as
(offset, length) within the commodity's ``demand[origin][final]`` bytes.

Relay lanes (FAST-/DeepEP-like schedules: ``origin``/``final`` differ from ``src``/``dst``)
forward bytes their source received in an *earlier* activation (paper 000, Section 3: stages
run one after another); a schedule that forwards data not yet held, or that does not deliver
exactly the demand, is rejected with a one-line ``SpecError`` before any process starts.

Every byte carries a pattern derived from (origin, final, offset) (``pattern``), so the final
receiver verifies each byte it got against what the demand says it should be; a relay sends
on the bytes it actually received, so corruption anywhere on the way is caught at the end.

Baselines of the same demand (issue #8: "the scheduler's effect on their hardware"):
``pairwise_plan`` is the NCCL-like static pairwise exchange (stage k sends i -> i+k mod N,
whole volumes; ``collectives.alltoallv.baselines.NcclPairwise`` without paths) and
``single_call_plan`` is one ``all_to_all_single`` with split sizes.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from collectives.errors import SpecError

SCHEDULE_FORMAT = "gxnet.alltoallv.schedule/1"
KINDS = ("lanes", "all_to_all_single")


@dataclass(frozen=True, slots=True, kw_only=True)
class LanePlan:
    src: int
    dst: int
    origin: int
    final: int
    nbytes: int
    pieces: tuple[tuple[int, int], ...]  # (offset, length) within commodity (origin, final), in send order
    tag: int  # position in the activation's global lane order (gloo tag; NCCL matches in this order)

    @property
    def delivers(self) -> bool:
        return self.dst == self.final


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayPlan:
    name: str  # "variopath", "nccl_pairwise", "all_to_all_single", ...
    kind: str  # "lanes" | "all_to_all_single"
    world_size: int
    demand: tuple[tuple[int, ...], ...]  # bytes, demand[i][j] from rank i to rank j
    activations: tuple[tuple[LanePlan, ...], ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise SpecError(f"replay kind {self.kind!r} is unknown; use one of {', '.join(KINDS)}")

    @property
    def total_bytes(self) -> int:
        return int(sum(map(sum, self.demand)))

    @property
    def n_activations(self) -> int:
        return len(self.activations) if self.kind == "lanes" else 1

    def lanes_of(self, rank: int, activation: int) -> tuple[list[LanePlan], list[LanePlan]]:
        """(sends, receives) of one rank in one activation, in the global lane order."""
        lanes = self.activations[activation]
        return [l for l in lanes if l.src == rank], [l for l in lanes if l.dst == rank]

    def to_json(self) -> dict:
        return {"name": self.name, "kind": self.kind, "world_size": self.world_size,
                "demand": [list(r) for r in self.demand],
                "activations": [[{"src": l.src, "dst": l.dst, "origin": l.origin, "final": l.final,
                                  "nbytes": l.nbytes, "pieces": [list(p) for p in l.pieces], "tag": l.tag}
                                 for l in act] for act in self.activations]}

    @staticmethod
    def from_json(obj: dict) -> "ReplayPlan":
        acts = tuple(tuple(LanePlan(src=l["src"], dst=l["dst"], origin=l["origin"], final=l["final"],
                                    nbytes=l["nbytes"], pieces=tuple(tuple(p) for p in l["pieces"]), tag=l["tag"])
                           for l in act) for act in obj["activations"])
        return ReplayPlan(name=obj["name"], kind=obj["kind"], world_size=obj["world_size"],
                          demand=tuple(tuple(int(x) for x in r) for r in obj["demand"]), activations=acts)


# ---- the byte pattern ---------------------------------------------------------------------------

def pattern(origin: int, final: int, offset: int, length: int) -> np.ndarray:
    """The bytes [offset, offset+length) of commodity (origin, final): a cheap integer hash, so a
    byte delivered to the wrong rank, at the wrong offset or from the wrong source mismatches."""
    k = np.arange(offset, offset + length, dtype=np.uint64)
    with np.errstate(over="ignore"):
        x = k * np.uint64(0x9E3779B1) + np.uint64((origin * 0x85EBCA77 + final * 0xC2B2AE3D + 0x27D4EB2F) & 0xFFFFFFFF)
        x ^= x >> np.uint64(15)
        x *= np.uint64(0x2C1B3C6D)
        x ^= x >> np.uint64(12)
    return (x & np.uint64(0xFF)).astype(np.uint8)


def mismatches(received: np.ndarray, origin: int, final: int, pieces) -> int:
    """Bytes of ``received`` (the pieces concatenated) that differ from the pattern."""
    bad, pos = 0, 0
    for off, length in pieces:
        bad += int(np.count_nonzero(received[pos:pos + length] != pattern(origin, final, off, length)))
        pos += length
    if pos != received.size:
        raise ValueError(f"received {received.size} bytes, pieces cover {pos}")
    return bad


# ---- plans -------------------------------------------------------------------------------------

def _demand(obj, n: int) -> np.ndarray:
    try:
        d = np.asarray(obj, dtype=np.int64)
    except (TypeError, ValueError):
        raise SpecError("schedule demand_bytes must be a square matrix of whole byte counts") from None
    if d.shape != (n, n):
        raise SpecError(f"schedule demand_bytes has shape {d.shape}; world_size={n} needs {n} x {n}")
    if (d < 0).any():
        raise SpecError("schedule demand_bytes holds a negative byte count; volumes must be >= 0")
    return d


def _int(v, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise SpecError(f"{what}={v!r} must be a whole number")
    return int(v)


def plan_from_schedule(obj: dict, name: str | None = None) -> ReplayPlan:
    """Validate a schedule.json document and assign every lane the pieces it carries."""
    if not isinstance(obj, dict) or obj.get("format") != SCHEDULE_FORMAT:
        got = obj.get("format") if isinstance(obj, dict) else type(obj).__name__
        raise SpecError(f"schedule format {got!r} is not {SCHEDULE_FORMAT!r}; write it with pipelines.alltoallv "
                        f"(AlltoallvSchedule.to_json)")
    n = _int(obj.get("world_size"), "schedule world_size")
    if n < 2:
        raise SpecError(f"schedule world_size={n} must be >= 2 for an AlltoAllv replay")
    demand = _demand(obj.get("demand_bytes"), n)
    np.fill_diagonal(demand, 0)  # self traffic is local (never scheduled)
    # held[(rank, origin, final)]: [offset, length] pieces a rank may send on, in arrival order
    held: dict[tuple[int, int, int], deque] = {}
    for i in range(n):
        for j in range(n):
            if demand[i, j]:
                held[(i, i, j)] = deque([[0, int(demand[i, j])]])
    delivered = np.zeros((n, n), dtype=np.int64)
    acts = []
    for a, act in enumerate(obj.get("activations") or []):
        lanes = []
        arrivals = []
        for lane in act.get("lanes", []):
            src, dst = _int(lane.get("src"), "lane src"), _int(lane.get("dst"), "lane dst")
            nbytes = _int(lane.get("bytes"), "lane bytes")
            origin = _int(lane.get("origin", src), "lane origin")
            final = _int(lane.get("final", dst), "lane final")
            origin, final = (src if origin < 0 else origin), (dst if final < 0 else final)
            for what, r in (("src", src), ("dst", dst), ("origin", origin), ("final", final)):
                if not 0 <= r < n:
                    raise SpecError(f"activation {a}: lane {what}={r} is not a rank of world_size={n}")
            if src == dst:
                raise SpecError(f"activation {a}: lane {src}->{dst} is a self-transfer; self traffic is local")
            if nbytes < 0:
                raise SpecError(f"activation {a}: lane {src}->{dst} has {nbytes} bytes; must be >= 0")
            if nbytes == 0:
                continue
            pieces = _take(held.get((src, origin, final)), nbytes)
            if pieces is None:
                raise SpecError(f"activation {a}: lane {src}->{dst} sends {nbytes} B of {origin}->{final} that rank "
                                f"{src} does not hold before this activation; relays may only forward earlier data")
            lanes.append(LanePlan(src=src, dst=dst, origin=origin, final=final, nbytes=nbytes,
                                  pieces=tuple(pieces), tag=len(lanes)))
            if dst == final:
                delivered[origin, final] += nbytes
            else:
                arrivals.append(((dst, origin, final), pieces))
        for key, pieces in arrivals:  # usable from the next activation on
            held.setdefault(key, deque()).extend([off, ln] for off, ln in pieces)
        if lanes:
            acts.append(tuple(lanes))
    if not np.array_equal(delivered, demand):
        i, j = map(int, np.argwhere(delivered != demand)[0])
        raise SpecError(f"schedule delivers {int(delivered[i, j])} B from rank {i} to rank {j} but the demand is "
                        f"{int(demand[i, j])} B; every byte must reach its destination exactly once")
    return ReplayPlan(name=name or str(obj.get("scheduler", "schedule")), kind="lanes", world_size=n,
                      demand=tuple(tuple(int(x) for x in r) for r in demand), activations=tuple(acts))


def _take(queue: deque | None, nbytes: int) -> list[tuple[int, int]] | None:
    """Pop ``nbytes`` from the front of a rank's pieces of one commodity (FIFO); None if it holds
    fewer. Pieces received in the current activation are not in the queue yet (see caller)."""
    if queue is None or sum(p[1] for p in queue) < nbytes:
        return None
    out, need = [], nbytes
    while need:
        piece = queue[0]
        take = min(need, piece[1])
        out.append((piece[0], take))
        piece[0] += take
        piece[1] -= take
        need -= take
        if piece[1] == 0:
            queue.popleft()
    return out


def pairwise_plan(demand, name: str = "nccl_pairwise") -> ReplayPlan:
    """NCCL-like static pairwise exchange: stage k = 1..N-1 sends i -> (i+k) mod N, whole volumes."""
    d = np.asarray(demand, dtype=np.int64)
    n = d.shape[0]
    acts = []
    for k in range(1, n):
        lanes = [(i, (i + k) % n) for i in range(n) if d[i, (i + k) % n] > 0]
        if lanes:
            acts.append(tuple(LanePlan(src=i, dst=j, origin=i, final=j, nbytes=int(d[i, j]),
                                       pieces=((0, int(d[i, j])),), tag=t) for t, (i, j) in enumerate(lanes)))
    return ReplayPlan(name=name, kind="lanes", world_size=n, demand=tuple(tuple(int(x) for x in r) for r in d),
                      activations=tuple(acts))


def single_call_plan(demand, name: str = "all_to_all_single") -> ReplayPlan:
    """One ``all_to_all_single`` with input/output split sizes taken from the demand."""
    d = np.asarray(demand, dtype=np.int64)
    return ReplayPlan(name=name, kind="all_to_all_single", world_size=d.shape[0],
                      demand=tuple(tuple(int(x) for x in r) for r in d))


# ---- metrics -----------------------------------------------------------------------------------

def bandwidths(total_bytes: int, world_size: int, completion_s: float) -> tuple[float, float]:
    """algbw and busbw as nccl-tests define them for all-to-all (doc/PERFORMANCE.md): algbw = S / t
    with S the bytes each rank sends (averaged over ranks for AlltoAllv: total / N), busbw =
    algbw * (N-1) / N; the same convention as ``fabrics.pcie.evaluator``."""
    if completion_s <= 0:
        return 0.0, 0.0
    algbw = total_bytes / (world_size * completion_s)
    return algbw, algbw * (world_size - 1) / world_size
