"""``python -m pipelines.splits``: every feasible Helix split (paper 003, Appendix B.6).

results.json: ``count`` and ``splits`` (list of {kvp, tpa, ep, tpe}).
"""

from __future__ import annotations

from pipelines.app import gx_main
from pipelines.budgets import preflight
from pipelines.specs import model_spec, positive_int


def task(cfg) -> dict:
    from gxnet.splits import helix_splits

    preflight("splits", cfg)
    model = model_spec(cfg)
    world = positive_int(cfg["world"], "world")
    splits = helix_splits(model, world)
    rows = [{"kvp": s.kvp, "tpa": s.tpa, "ep": s.ep, "tpe": s.tpe} for s in splits]
    print(f"{len(rows)} Helix splits for {model.name} on {world} accelerators")
    return {"model": model.name, "world": world, "count": len(rows), "splits": rows}


main = gx_main("splits")(task)

if __name__ == "__main__":
    main()
