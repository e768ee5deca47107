"""The network-model protocol (paper 003, Section 4.3 and Appendix B.4).

GXNET's executor registers each collective with its earliest start time until nothing more
can be registered, then calls ``advance()``; the network model returns the completions it
has resolved (at least one while anything is pending). Every model -- analytical, flow-level,
Simlette -- implements the same four calls and is chosen by ``network=<name>`` through the
registry in ``fabrics.network.registry``:

- ``prepare(demand, world)``: the deployment's demand (Table 1 rows) before the walk; OCS
  planning happens here. A registered collective outside that demand is an error (B.4).
- ``register(call, earliest_start_s)``: a collective whose dependencies are met.
- ``advance() -> [Completion]``: resolve at least one pending call. A completion carries the
  schedule the model used, the planning time charged on the critical path before the data
  moved (online AlltoAllv planning on PCIe; zero elsewhere) and, where a model has them, the
  parts its time is made of.
- ``report() -> NetworkReport``: what the model did over the walk (schedules per demand row,
  the circuit plan, model-specific details), read by the pipelines instead of probing the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol, runtime_checkable

COLLECTIVES = ("allreduce", "alltoall", "allgather", "reducescatter", "alltoallv")


@dataclass(frozen=True, slots=True, kw_only=True)
class DemandEntry:
    """One row of the deployment-time demand table (paper 003, Table 1)."""

    region: str  # "attention" | "ffn" | "lm_head" | ...
    axis: str  # mesh axis name: "world", "kvp", "tpa", "ep", "tpe", "tp"
    collective: str  # one of COLLECTIVES, or "none"
    groups: int  # G: number of disjoint groups
    ranks: int  # R: ranks per group
    calls_per_step: int
    payload_bytes: int  # per-rank buffer sigma per call

    def key(self) -> tuple[str, str, str]:
        return (self.region, self.axis, self.collective)


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectiveCall:
    """One collective instance registered with a network model.

    ``groups`` lists every concurrent group of this call as tuples of global ranks; ranks with
    identical behaviour are represented once in GXNET's plan but the network model sees all
    groups, so it can account for shared links (Simlette, flow) or price them together.
    """

    call_id: int
    region: str
    axis: str
    collective: str
    groups: tuple[tuple[int, ...], ...]
    payload_bytes: int  # per-rank buffer sigma
    # alltoallv only (optional): the per-call demand matrix in bytes, indexed by position in the
    # group (one group) -- expert dispatch/combine whose volumes depend on the routing. Models
    # that ignore it price the call from ``payload_bytes``.
    demand: Any = field(default=None, compare=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class Completion:
    call_id: int
    start_s: float
    end_s: float  # planning + data movement
    schedule: str = ""  # schedule the model used
    planning_s: float = 0.0  # of end_s - start_s: planning charged before the data moved
    parts: Mapping[str, float] = field(default_factory=dict, compare=False)  # model-specific split, seconds


@dataclass(frozen=True, slots=True, kw_only=True)
class NetworkReport:
    """What a network model did over one walk (the pipelines' only view into a model)."""

    model: str  # registry name: analytical | flow | simlette
    schedules: Mapping[str, str] = field(default_factory=dict)  # "region/axis/collective" -> schedule used
    plan_summary: Mapping[str, Any] | None = None  # circuit plan of hybrid / OCS fabrics (results.json)
    plan_json: Mapping[str, Any] | None = None  # the whole plan (plan.json artifact)
    details: Mapping[str, Any] | None = None  # model-specific, JSON-able (Simlette: link use, credit stalls)


@runtime_checkable
class NetworkModel(Protocol):
    def prepare(self, demand: tuple[DemandEntry, ...], world: int) -> None:
        """Receive the deployment demand before execution (OCS planning happens here)."""

    def register(self, call: CollectiveCall, earliest_start_s: float) -> None:
        """Register a collective whose dependencies are satisfied at ``earliest_start_s``."""

    def advance(self) -> list[Completion]:
        """Resolve at least one pending collective and return the completions."""

    def report(self) -> NetworkReport:
        """What the model did since ``prepare``."""


def schedules_by_row(used: Mapping[tuple[str, str, str], str]) -> dict[str, str]:
    """``{(region, axis, collective): schedule}`` as the ``"region/axis/collective"`` keys of results.json."""
    return {"/".join(k): v for k, v in used.items()}


def check_in_demand(call: CollectiveCall, demand: tuple[DemandEntry, ...]) -> None:
    """B.4: a registered collective outside the declared demand is an error."""
    for row in demand:
        if (
            row.region == call.region
            and row.axis == call.axis
            and row.collective == call.collective
            and row.ranks == len(call.groups[0])
            and row.groups == len(call.groups)
        ):
            return
    raise RuntimeError(
        f"collective {call.collective} on axis {call.axis} in region {call.region} "
        f"({len(call.groups)}x{len(call.groups[0])}) is outside the declared demand"
    )


class IndependentCalls:
    """The protocol's ``register`` / ``advance`` / ``report`` for a model that prices every call on
    its own when it is registered (no contention between concurrent collectives, B.4); a subclass
    gives ``call_price(call) -> (seconds, schedule)`` and sets ``_pending`` / ``schedules_used``.

    The contract a subclass keeps (and the executor relies on, ``gxnet.executor``): between two
    ``prepare`` calls, ``call_price`` depends on the call's structure and payload only (not on
    its id, its start or the calls before it), and ``register(call, t)`` completes the call at
    ``t + duration`` with no planning time. A walk may then price each distinct call once and
    ``book`` the schedule of every further call, without a Completion per call."""

    name = "analytical"
    _pending: list
    schedules_used: dict

    def call_price(self, call: CollectiveCall) -> tuple[float, str]:
        raise NotImplementedError

    def book(self, key: tuple[str, str, str], schedule: str) -> None:
        """Record that a call of demand row ``key`` (region, axis, collective) ran ``schedule``."""
        self.schedules_used[key] = schedule

    def register(self, call: CollectiveCall, earliest_start_s: float) -> None:
        duration_s, schedule = self.call_price(call)
        self.book((call.region, call.axis, call.collective), schedule)
        self._pending.append(Completion(call_id=call.call_id, start_s=earliest_start_s,
                                        end_s=earliest_start_s + duration_s, schedule=schedule))

    def advance(self) -> list[Completion]:
        done, self._pending = self._pending, []
        return done

    def report(self) -> NetworkReport:
        return NetworkReport(model=self.name, schedules=schedules_by_row(self.schedules_used))
