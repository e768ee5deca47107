"""Simlette: flit-level discrete-event network simulation on SimPy (paper 003, Section 5, Appendix C).

Layers (C.1): ``routing`` (physical topology as simulator links + routing/spraying/circuits),
worker allocation (group rank i on accelerator group[i]), ``selection`` + ``runner`` (collective
schedules and their per-rank phase dependencies), ``engine`` (ports, credits, flits, deferred
latency accounting). ``model.SimletteNetwork`` is the ``NetworkModel``; build it through the
network-model registry (``network=simlette``) or ``build.build_simlette`` from typed specs. Every scale-up fabric: routing comes from
``fabrics.scaleup.paths``, and
hybrid / OCS deployments (placement, circuits, schedules) from the fabric-aware analytical model's
``prepare``, so both models time the same deployment.
"""

from fabrics.network.simlette.build import SimletteSpec, build_simlette, simulate_collective
from fabrics.network.simlette.model import SimletteNetwork
from fabrics.network.simlette.params import SimletteParams

__all__ = ["SimletteNetwork", "SimletteParams", "SimletteSpec", "build_simlette", "simulate_collective"]
