"""Per-rank memory footprint and the largest batch that fits (paper 003, Section 4.1, D.1).

Weights and KV cache per rank come from the same sharded graph as the demand and the timing
(``gxnet.compile``): every weight tensor's per-rank bytes times its section's repetitions, every
KV-cache tensor's per-rank bytes (full layers hold the context shard, sliding layers their
window). Activations are negligible in decode and not counted.
"""

from __future__ import annotations

from collectives.errors import SpecError
from gxnet.compile import compiled_program


def memory_breakdown_bytes(model, accelerator, parallel, precision, batch: int, context: int) -> tuple[int, int]:
    """(weights, kv) bytes per rank; the KV term is the busiest rank's (all ranks hold equal KV)."""
    prog = compiled_program(model, parallel.scheme, precision, accelerator)
    vals = prog.evaluate(batch, context, parallel.kvp, parallel.tpa, parallel.ep, parallel.tpe, 1, 1, 1)
    return int(round(vals[prog.weights_index])), int(round(vals[prog.kv_index]))


def memory_per_rank_bytes(d) -> int:
    w, kv = memory_breakdown_bytes(d.model, d.accelerator, d.parallel, d.precision, d.batch, d.context_tokens)
    return w + kv


def max_batch(d, limit: int = 1 << 20) -> int:
    """Largest power-of-two batch whose weights + KV cache fit in one rank's HBM (0 if none)."""
    best, b = 0, 1
    while b <= limit:
        w, kv = memory_breakdown_bytes(d.model, d.accelerator, d.parallel, d.precision, b, d.context_tokens)
        if w + kv > d.accelerator.hbm_bytes:
            break
        best, b = b, b * 2
    return best


def largest_batch(model, accelerator, parallel, precision, context: int) -> int:
    """Largest batch (any integer; DP-attention: a multiple of DPA) whose weights + KV cache fit
    one rank's HBM. The KV cache grows linearly with the batch, so one evaluation gives it; the
    bound is then confirmed at the batch and one step above."""
    unit = parallel.kvp if parallel.scheme == "dp_attention" else 1
    cap = accelerator.hbm_bytes
    w, kv = memory_breakdown_bytes(model, accelerator, parallel, precision, unit, context)
    if w + kv > cap:
        return 0
    n = int((cap - w) // kv) * unit
    while n > unit and sum(memory_breakdown_bytes(model, accelerator, parallel, precision, n, context)) > cap:
        n -= unit
    while sum(memory_breakdown_bytes(model, accelerator, parallel, precision, n + unit, context)) <= cap:
        n += unit
    return n


def weights_bytes(model, precision) -> int:
    """All weights of the model (MTP layers excluded) at ``precision``: each weight group at its
    stored width (scale overhead included; the model's BF16 groups at 16 bits)."""
    from gxnet.passes.precision import weight_bits

    groups = model.param_groups()
    total = sum(n * weight_bits(precision, g, model.bf16_weights) for g, n in groups.items())
    return int(-(-total // 8))


def _gb(x: float) -> str:
    return f"{x / 1e12:.1f} TB" if x >= 1e12 else f"{x / 1e9:.1f} GB"


def check_fits(d) -> None:
    w, kv = memory_breakdown_bytes(d.model, d.accelerator, d.parallel, d.precision, d.batch, d.context_tokens)
    cap = d.accelerator.hbm_bytes
    if w + kv <= cap:
        return
    best = max_batch(d)
    fix = (f"largest power-of-two batch that fits is {best}" if best else
           "no batch fits: use more ranks or a shorter context")
    raise SpecError(
        f"batch={d.batch} needs {_gb(w + kv)} per rank (weights {_gb(w)} + KV cache {_gb(kv)} at "
        f"context {d.context_tokens}) > {_gb(cap)} HBM of {d.accelerator.name}; {fix}")
