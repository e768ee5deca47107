"""Pass manager (modelled on torch.fx's pass infra): orders passes, names the failing one and,
when asked (tests), checks the graph invariants after every pass."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from gxnet.ir import Graph


class PassError(RuntimeError):
    """A pass raised, or left the graph violating an invariant; the message names the pass."""


@dataclass(frozen=True, slots=True)
class Pass:
    name: str
    fn: Callable[[Graph], Graph]

    def __call__(self, g: Graph) -> Graph:
        return self.fn(g)


class PassManager:
    def __init__(self, passes: list[Pass], check_invariants: bool = False,
                 bindings: Mapping | None = None):
        self.passes = list(passes)
        self.check_invariants = check_invariants
        self.bindings = bindings  # concrete symbol values for numeric invariant checks (tests)
        self.history: list[tuple[str, Graph]] = []

    def run(self, g: Graph) -> Graph:
        from collectives.errors import SpecError
        from gxnet.invariants import check_graph

        self.history = [("input", g)]
        for p in self.passes:
            before = g
            try:
                g = p(g)
            except SpecError:
                raise
            except Exception as exc:  # name the failing pass, keep the cause
                raise PassError(f"pass {p.name!r} failed: {exc}") from exc
            if self.check_invariants:
                problems = check_graph(g, before=before, bindings=self.bindings)
                if problems:
                    raise PassError(f"after pass {p.name!r}: " + "; ".join(problems[:5]))
            self.history.append((p.name, g))
        return g


def standard_pipeline(scheme: str, precision, accelerator=None, phase: str = "decode") -> list[Pass]:
    """B.1 order: decode -> precision -> sharding -> collective insertion -> fusion ->
    resources -> roofline (the last one only when an accelerator is given).

    ``phase="prefill"`` replaces the first pass by the prefill specialization (passes/prefill.py);
    everything after it is the same."""
    from gxnet.passes.collectives import insert_collectives
    from gxnet.passes.decode import specialize_decode
    from gxnet.passes.fusion import fuse_windows
    from gxnet.passes.precision import assign_precision
    from gxnet.passes.resources import annotate_resources
    from gxnet.passes.roofline import annotate_roofline
    from gxnet.passes.sharding import shard

    from gxnet.passes.prefill import specialize_prefill

    if phase not in ("decode", "prefill"):
        from collectives.errors import SpecError

        raise SpecError(f"phase={phase!r}; choose decode or prefill")
    passes = [
        Pass("decode", specialize_decode) if phase == "decode" else Pass("prefill", specialize_prefill),
        Pass("precision", lambda g: assign_precision(g, precision)),
        Pass(f"sharding[{scheme}]", lambda g: shard(g, scheme)),
        Pass("collective_insertion", lambda g: insert_collectives(g, precision)),
        Pass("fusion", fuse_windows),
        Pass("resources", annotate_resources),
    ]
    if accelerator is not None:
        passes.append(Pass("roofline", lambda g: annotate_roofline(g, accelerator)))
    return passes
