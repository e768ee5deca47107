"""``gx model``: the model card of any model at a precision, optionally on a parallel split.

results.json: ``model``, ``precision``, ``total_params``, ``active_params`` (every weight one
token's decode reads: all non-expert weights incl. embedding and LM head, shared experts, the
top-k routed experts), ``mtp_params``, ``weights_bytes``, ``kv_cache_bytes_per_token``,
``params_by_group`` and ``layers`` (per layer kind: count, parameters per layer); with
``parallel=`` (and ``world=``): ``per_rank`` = {parallel, world, batch, context, weights_bytes,
kv_cache_bytes, memory_bytes, hbm_bytes, fits, max_batch}. ``export_yaml=PATH`` also writes the
model as a YAML usable as ``model=<file stem>``.
"""

from __future__ import annotations

from pathlib import Path

from collectives.errors import SpecError
from pipelines.app import gx_main
from pipelines.outputs import write_atomic
from pipelines.specs import accelerator_spec, model_spec, parallel_spec, plain, positive_int


def layer_kinds(m) -> list[dict]:
    rows: dict[tuple[str, str], int] = {}
    for kind in m.layer_plan():
        rows[kind] = rows.get(kind, 0) + 1
    out = []
    for (attention, ffn), n in rows.items():
        ffn_total = m.ffn_params(False) if ffn == "moe" else m.dense_ffn_params() + m.hidden
        ffn_active = m.ffn_params(True) if ffn == "moe" else ffn_total
        out.append({"attention": "mla" if m.is_mla else attention, "window": attention, "ffn": ffn,
                    "layers": n, "params_per_layer": m.attention_params() + ffn_total,
                    "active_params_per_layer": m.attention_params() + ffn_active})
    return out


def model_card(m, precision) -> dict:
    from gxnet.memory import weights_bytes

    return {
        "model": m.name, "precision": precision.as_dict(),
        "total_params": m.total_params(), "active_params": m.active_params(), "mtp_params": m.mtp_params(),
        "weights_bytes": weights_bytes(m, precision),
        "kv_cache_bytes_per_token": m.kv_bytes_per_token(kv_bits=precision.kv_bits),
        "params_by_group": m.param_groups(), "active_params_by_group": m.param_groups(active=True),
        "layers": layer_kinds(m),
    }


def _parallel(cfg, m):
    from gxnet.parallel import ParallelSpec

    if cfg.get("parallel") is not None:
        return parallel_spec(cfg)
    if cfg.get("world") is None:
        return None
    world = positive_int(cfg["world"], "world")
    return ParallelSpec(scheme="tp_ep", tp=world, ep=1)  # world alone: tensor parallelism


def per_rank(cfg, m, precision) -> dict | None:
    from gxnet.deployment import split_violation
    from gxnet.memory import largest_batch, memory_breakdown_bytes

    p = _parallel(cfg, m)
    if p is None:
        return None
    if cfg.get("world") is not None and positive_int(cfg["world"], "world") != p.world:
        raise SpecError(f"world={cfg['world']} but parallel {p.label()} spans {p.world} ranks; "
                        f"set world={p.world} or change the degrees")
    problem = split_violation(m, p)
    if problem:
        raise SpecError(problem)
    acc = accelerator_spec(cfg)
    batch, context = positive_int(cfg["batch"], "batch"), positive_int(cfg["context"], "context")
    w, kv = memory_breakdown_bytes(m, acc, p, precision, batch, context)
    return {"parallel": p.as_dict(), "world": p.world, "accelerator": acc.name, "batch": batch,
            "context": context, "weights_bytes": w, "kv_cache_bytes": kv, "memory_bytes": w + kv,
            "hbm_bytes": acc.hbm_bytes, "fits": w + kv <= acc.hbm_bytes,
            "max_batch": largest_batch(m, acc, p, precision, context)}


def export_yaml(m, path: str) -> None:
    """Write ``m`` as a conf/model YAML named after the file (model=<stem>)."""
    import yaml

    from gxnet.models import model_as_dict

    target = Path(path).expanduser()
    d = model_as_dict(m)
    d["name"] = target.stem
    header = f"# Exported by `gx model` from {m.name}; use as model={target.stem} with this folder's parent\n" \
             "# on hydra.searchpath.\n"
    write_atomic(target, header + yaml.safe_dump(d, sort_keys=False, default_flow_style=False))


def task(cfg) -> dict:
    from gxnet.precision import precision_from_dict

    m = model_spec(cfg)
    precision = precision_from_dict(plain(cfg["precision"]))
    results = model_card(m, precision)
    rank = per_rank(cfg, m, precision)
    if rank is not None:
        results["per_rank"] = rank
    if cfg.get("export_yaml"):
        export_yaml(m, str(cfg["export_yaml"]))
        results["exported_yaml"] = str(cfg["export_yaml"])
    print(f"{m.name}: {m.total_params() / 1e9:.2f} B parameters ({m.active_params() / 1e9:.2f} B active, "
          f"MTP {m.mtp_params() / 1e9:.2f} B), {results['weights_bytes'] / 1e9:.1f} GB at {precision.name}, "
          f"KV {results['kv_cache_bytes_per_token']:,} B/token")
    if rank is not None:
        print(f"per rank ({rank['world']} x {rank['accelerator']}, batch {rank['batch']}, context {rank['context']}): "
              f"{rank['memory_bytes'] / 1e9:.1f} GB of {rank['hbm_bytes'] / 1e9:.1f} GB; "
              f"largest batch that fits: {rank['max_batch']}")
    return results


main = gx_main("model")(task)

if __name__ == "__main__":
    main()
