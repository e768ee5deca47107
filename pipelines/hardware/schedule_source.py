"""Where a replayed schedule comes from and what the model predicted for it.

- ``load_schedule(path)`` / ``schedule_from_run(tracker, run_id, dst)``: a ``schedule.json``
  file, or the ``schedule.json`` artifact of an MLflow run (``pipelines.alltoallv`` logs it);
- ``predict(schedule_json, platform, nodes, overhead_s)``: the flow-level PCIe evaluator's
  completion time for the same lanes on a platform model (``fabrics.pcie``), so measured and
  predicted sit side by side; the NCCL-like baseline is predicted with its nearest paths.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from collectives.errors import SpecError

PLATFORM_DIR = Path(__file__).resolve().parents[2] / "conf" / "platform"


def load_schedule(path: str | Path, what: str = "schedule") -> dict:
    """A schedule.json, every field checked for shape (``pipelines.file_checks.SCHEDULE``)."""
    from pipelines.file_checks import load_schedule as checked

    if not Path(path).is_file():
        raise SpecError(f"{what}={str(path)!r} does not exist; give the schedule.json written by pipelines.alltoallv")
    return checked(path, what)


def schedule_from_run(client, run_id: str, dst: Path, name: str = "schedule.json") -> dict:
    """Download ``name`` (default ``schedule.json``) from an MLflow run's artifacts."""
    try:
        client.get_run(run_id)
    except Exception:  # mlflow raises its own exception types for unknown ids
        raise SpecError(f"run_id={run_id!r} is not a run in this MLflow store; check tracking.uri") from None
    names = {a.path for a in client.list_artifacts(run_id)}
    if name not in names:
        raise SpecError(f"run {run_id} has no {name} artifact (has: {', '.join(sorted(names)) or 'none'}); "
                        f"replay a pipelines.alltoallv run, name the artifact with schedule=<name>, or pass "
                        f"schedule=<path> without run_id")
    local = client.download_artifacts(run_id, name, str(dst))
    return load_schedule(local)


def platform_dict(platform, schedule: dict) -> dict | None:
    """``auto``: conf/platform/<schedule's platform>.yaml when it exists; a path; or None."""
    import yaml

    if platform in (None, "none", False):
        return None
    if platform == "auto":
        p = PLATFORM_DIR / f"{schedule.get('platform', '')}.yaml"
        if not p.is_file():
            return None
    else:
        p = Path(platform)
        if not p.is_file():
            p = PLATFORM_DIR / f"{platform}.yaml"
        if not p.is_file():
            options = ", ".join(sorted(x.stem for x in PLATFORM_DIR.glob("*.yaml")))
            raise SpecError(f"predict.platform={platform!r} is neither a file nor one of: {options}")
    return yaml.safe_load(p.read_text())


def schedule_object(obj: dict):
    """``AlltoallvSchedule`` from its JSON (paths keep kind, resources and rate)."""
    from collectives.alltoallv.activations import Activation, AlltoallvSchedule, Lane
    from collectives.alltoallv.channels import PathOption

    acts = []
    for act in obj["activations"]:
        lanes = []
        for l in act["lanes"]:
            p = l["path"]
            path = PathOption(src=l["src"], dst=l["dst"], kind=p["kind"], resources=tuple(p["resources"]),
                              shared=tuple(p.get("shared", ())), rate_Bps=float(p["rate_Bps"]))
            lanes.append(Lane(src=l["src"], dst=l["dst"], path=path, bytes=int(l["bytes"]),
                              origin=l.get("origin", -1), final=l.get("final", -1)))
        acts.append(Activation(lanes=tuple(lanes)))
    return AlltoallvSchedule(scheduler=obj.get("scheduler", "schedule"), platform=obj.get("platform", ""),
                             n_ranks=obj["world_size"], demand=np.asarray(obj["demand_bytes"], dtype=np.int64),
                             activations=tuple(acts), channels=bool(obj.get("contention_free_channels", False)))


def cluster_of(platform: dict, world: int, nodes):
    from pipelines.network import pcie_cluster

    per_node = int(platform.get("gpus_per_node", 0)) or 1
    if nodes in (None, "auto"):
        if world % per_node:
            raise SpecError(f"world_size={world} is not a multiple of {platform.get('name')}'s {per_node} GPUs per "
                            f"node; pass predict.nodes=<n> or predict.platform=none")
        nodes = world // per_node
    cluster = pcie_cluster(platform, int(nodes))
    if cluster.n_ranks != world:
        raise SpecError(f"platform {platform.get('name')} with nodes={nodes} has {cluster.n_ranks} GPUs; "
                        f"the schedule has world_size={world}")
    return cluster


def predict(schedule: dict, cluster, overhead_s: float) -> float:
    from fabrics.pcie.evaluator import evaluate

    return evaluate(schedule_object(schedule), cluster.capacities(), overhead_s).completion_s


def predict_pairwise(demand, cluster, overhead_s: float) -> float:
    from collectives.alltoallv.baselines import NcclPairwise
    from fabrics.pcie.evaluator import evaluate
    from fabrics.pcie.paths import channel_topology

    sched = NcclPairwise(channel_topology(cluster)).plan(np.asarray(demand, dtype=np.int64))
    return evaluate(sched, cluster.capacities(), overhead_s).completion_s
