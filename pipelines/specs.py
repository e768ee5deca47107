"""Config → frozen specs, at the config edge (the only place human units are parsed).

Every function takes the composed Hydra config (a DictConfig or plain dict) and returns
validated frozen specs from the core rooms; invalid values raise ``SpecError``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from collectives.errors import SpecError
from pipelines.units import KINDS, parse_bytes


def plain(node: Any) -> Any:
    """A DictConfig/ListConfig as plain Python containers (resolved)."""
    try:
        from omegaconf import DictConfig, ListConfig, OmegaConf
    except ImportError:  # pragma: no cover - omegaconf is a dependency
        return node
    if isinstance(node, (DictConfig, ListConfig)):
        return OmegaConf.to_container(node, resolve=True)
    return node


def model_spec(cfg: Any):
    """``cfg.model`` as a ModelSpec; ``model=hf model.config=/path/config.json`` imports a
    HuggingFace config.json (pipelines.hf_config), any other model.* keys overriding it."""
    from gxnet.models import model_from_dict

    d = dict(plain(cfg["model"]))
    path = d.pop("config", None)
    if path is None and d.get("name") == "hf":
        raise SpecError("model=hf needs model.config=/path/to/config.json (a HuggingFace config.json)")
    if path is None:
        return model_from_dict(d)
    from pipelines.hf_config import model_from_hf_file

    name = d.pop("name", None)
    for k in ("source", "description"):
        d.pop(k, None)
    return model_from_hf_file(path, name=None if name in (None, "hf") else name, overrides=d)


def accelerator_spec(cfg: Any):
    from gxnet.accelerators import accelerator_from_dict

    return accelerator_from_dict(plain(cfg["accelerator"]))


def positive_int(value: Any, what: str) -> int:
    """A count (``pipelines.units.KINDS['count']``: whole, >= 1, K/M/G suffixes allowed)."""
    return int(KINDS["count"].check(value, what))


def parallel_spec(cfg: Any):
    from gxnet.parallel import ParallelSpec

    par = dict(plain(cfg["parallel"]))
    known = {"scheme", "kvp", "tpa", "ep", "tpe", "tp", "dpa"}
    unknown = sorted(set(par) - known)
    if unknown:
        raise SpecError(f"parallel.{unknown[0]} is not a parallelization option; use {', '.join(sorted(known))}")
    for key, val in list(par.items()):
        if key != "scheme" and val is not None:
            par[key] = positive_int(val, f"parallel.{key}")
    return ParallelSpec(**par)


# Fabric family "gpu" (fabrics.spec.ClusterSpec): where ``engine=auto`` means CUDA-graph replay.
GPU_FABRICS = ("nvswitch", "gpu_cluster")
ENGINE_DIR = Path(__file__).resolve().parent.parent / "conf" / "engine"


def engine_name(cfg: Any) -> str:
    """The engine that runs: ``cfg.engine.name`` with ``auto`` resolved -- ``cuda_graph`` on GPU
    fabrics, ``roofline`` (paper 003, B.3) elsewhere and where the config has no engine group."""
    node = cfg.get("engine") if hasattr(cfg, "get") else None
    name = str((plain(node) or {}).get("name") or "auto") if node is not None else "roofline"
    if name != "auto":
        return name
    fabric = cfg.get("fabric") if hasattr(cfg, "get") else None
    return "cuda_graph" if (plain(fabric) or {}).get("name") in GPU_FABRICS else "roofline"


def engine_spec(cfg: Any, accelerator):
    """``cfg.engine`` as an ``EngineSpec`` (gxnet.kernels), or None for the paper's roofline."""
    from gxnet.kernels import engine_from_dict

    name = engine_name(cfg)
    if name == "roofline":
        return None
    node = dict(plain(cfg.get("engine")) or {}) if cfg.get("engine") is not None else {}
    if node.get("name") != name:  # auto resolved: the profile of the engine it names
        path = ENGINE_DIR / f"{name}.yaml"
        import yaml

        node = yaml.safe_load(path.read_text())
    for key in ("kernel_gap", "window_launch"):
        if isinstance(node.get(key), str) and node[key] not in ("kernel_launch", "in_graph_launch"):
            node[key] = KINDS["time_s"].check(node[key], f"engine.{key}")
    return engine_from_dict(node, accelerator)


def _deployment_kwargs(cfg: Any, batch: int | None, parallel_of) -> dict:
    from pipelines.program_store import attach_default_program_store

    attach_default_program_store()  # a deployment compiles its family's program: kept between processes
    accelerator = accelerator_spec(cfg)
    kwargs = dict(
        model=model_spec(cfg),
        accelerator=accelerator,
        engine=engine_spec(cfg, accelerator),
        world=positive_int(cfg["world"], "world"),
        parallel=parallel_of(),
        batch=batch if batch is not None else positive_int(cfg["batch"], "batch"),
        context_tokens=positive_int(cfg["context"], "context"),
    )
    precision = cfg.get("precision") if hasattr(cfg, "get") else None
    if precision is not None:
        from gxnet.precision import precision_from_dict

        kwargs["precision"] = precision_from_dict(plain(precision))
    return kwargs


def deployment_spec(cfg: Any, *, batch: int | None = None, parallel=None):
    from gxnet.deployment import Deployment

    return Deployment(**_deployment_kwargs(cfg, batch, lambda: parallel if parallel is not None else parallel_spec(cfg)))


def deployment_factory(cfg: Any):
    """``parallel -> Deployment`` for one config, its specs parsed once (a search builds a
    deployment per split; parsing the config's nodes each time cost ~0.5 ms a split)."""
    from gxnet.deployment import Deployment

    kwargs = _deployment_kwargs(cfg, None, lambda: None)
    return lambda parallel: Deployment(**{**kwargs, "parallel": parallel})


__all__ = [
    "plain", "model_spec", "accelerator_spec", "parallel_spec", "deployment_spec", "deployment_factory",
    "positive_int", "parse_bytes", "engine_name", "engine_spec",
]
