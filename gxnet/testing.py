"""Test and benchmark helpers: a trivial network model behind the protocol, spec loaders.

``FixedLatencyNetwork`` prices every collective at a constant latency and records what it was
shown; it lets GXNET be tested (and benchmarked) without any fabric model.
"""

from __future__ import annotations

from pathlib import Path

from fabrics.network.protocol import CollectiveCall, Completion, DemandEntry, NetworkReport, check_in_demand

CONF = Path(__file__).resolve().parent.parent / "conf"


class FixedLatencyNetwork:
    """Every collective completes ``latency_s`` after its earliest start."""

    def __init__(self, latency_s: float = 5e-6, record: bool = True):
        self.latency_s = latency_s
        self.record = record
        self.demand: tuple[DemandEntry, ...] = ()
        self.world = 0
        self.prepared = 0
        self.registered: list[tuple[CollectiveCall, float]] = []
        self._pending: list[tuple[CollectiveCall, float]] = []

    def prepare(self, demand: tuple[DemandEntry, ...], world: int) -> None:
        self.demand, self.world = tuple(demand), world
        self.prepared += 1

    def register(self, call: CollectiveCall, earliest_start_s: float) -> None:
        check_in_demand(call, self.demand)
        if self.record:
            self.registered.append((call, earliest_start_s))
        self._pending.append((call, earliest_start_s))

    def advance(self) -> list[Completion]:
        out = [Completion(call_id=c.call_id, start_s=t, end_s=t + self.latency_s, schedule="fixed")
               for c, t in self._pending]
        self._pending = []
        return out

    def report(self) -> NetworkReport:
        return NetworkReport(model="fixed_latency")


def model(name: str):
    from gxnet.models import load_model_file

    return load_model_file(CONF / "model" / f"{name}.yaml")


def accelerator(name: str):
    from gxnet.accelerators import load_accelerator_file

    return load_accelerator_file(CONF / "accelerator" / f"{name}.yaml")


def deployment(model_name: str = "megatron_5t", accel: str = "rx00", world: int = 512,
               parallel: tuple[int, int, int, int] = (4, 128, 16, 32), batch: int = 1,
               context: int = 5_000_000, **kw):
    from gxnet.deployment import Deployment
    from gxnet.parallel import ParallelSpec

    kvp, tpa, ep, tpe = parallel
    return Deployment(model=model(model_name), accelerator=accelerator(accel), world=world,
                      parallel=ParallelSpec(kvp=kvp, tpa=tpa, ep=ep, tpe=tpe), batch=batch,
                      context_tokens=context, **kw)
