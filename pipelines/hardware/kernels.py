"""Torch implementations of GXNET's fused decode kernels at their per-rank shapes, and timing.

``build_kernel(torch, kernel_shape, dtype, device)`` allocates the kernel's inputs (weights,
activations, KV shard) and returns a zero-argument callable that runs its graph nodes in order
(one fused kernel of ``calibration_shapes``):

| node op | torch |
|---|---|
| rmsnorm, add | elementwise (fp32 statistics) |
| qkv_proj, o_proj, router, lm_head | GEMM (``h @ W``); router + top-k + softmax |
| kv_append | write one token's K and V into a cache slot |
| flash_attention | ``scaled_dot_product_attention`` of the local query heads over the local KV shard (GQA) |
| attn_combine | Helix rescale-combine of the KVP partial outputs by their statistics |
| expert_swiglu | grouped SwiGLU GEMM over the *active* experts (``bmm``), T_exp tokens each |
| expert_combine | gate-weighted sum of the gathered expert rows (``index_add_``) |
| embedding | row gather |
| matmul | SwiGLU MLP (dense FFN, shared experts), per-head GEMM (MLA q_absorb, v_up), GEMM (q_down, q_up, kv_down, MLA o_proj) |
| latent_attention | MLA decode over the latent cache: ``scaled_dot_product_attention`` of every head against the one latent |
| latent_combine | Helix rescale-combine of MLA's KVP partials |

Deliberate simplifications (documented in README.md): the KV cache of ``kv_append`` is a
small slot buffer (appending one token does not depend on the cache length); the embedding table
holds at most 4096 rows (a gather of B rows does not depend on the table size); flash-decode's
log-sum-exp output is not computed (SDPA does not return it; one value per head); K and V are
separate contiguous (B, H_kv, ctx, d) tensors.

``time_kernel`` measures median seconds per call: on CUDA with CUDA events around a CUDA-graph
replay of many calls (eager with events if capture fails), on CPU with ``perf_counter`` around
loops of calls long enough for the clock (>= 1 ms per sample).
"""

from __future__ import annotations

import math
import statistics
import time

from pipelines.hardware.calibration_shapes import KernelShape, OpShape

EMBED_ROWS = 4096


def _alloc(torch, shape, dtype, device, kind: str = "randn", high: int = 1):
    if device.type == "meta":
        return torch.empty(shape, dtype=dtype if kind != "index" else torch.long, device=device)
    if kind == "index":
        return torch.randint(0, max(1, high), shape, device=device)
    return (torch.randn(shape, dtype=torch.float32, device=device) * 0.02).to(dtype)


def build_kernel(torch, ks: KernelShape, dtype, device):
    """Allocate inputs and return ``fn()`` running the kernel's nodes; with ``device='meta'``
    nothing is allocated and ``fn`` is None (used to size a kernel before building it)."""
    F = torch.nn.functional
    env: dict = {}
    steps = []

    def tensor(t, kind="randn", high=1, shape=None):
        if t.name not in env:
            env[t.name] = _alloc(torch, shape or t.shape, dtype, device, kind, high)
        return t.name

    for op in ks.ops:
        steps.append(_op_step(torch, F, op, env, tensor, dtype, device, dict(ks.values)))
    if device.type == "meta":
        return None, env

    def fn():
        for step in steps:
            step()
    return fn, env


def alloc_bytes(torch, ks: KernelShape, dtype) -> int:
    _, env = build_kernel(torch, ks, dtype, torch.device("meta"))
    return sum(t.numel() * t.element_size() for t in env.values())


def _rms(torch, x, w):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * w


def _op_step(torch, F, op: OpShape, env: dict, tensor, dtype, device, values: dict):
    I, O = op.inputs, op.outputs
    name = op.op

    def put(key, value):
        env[key] = value

    if name == "embedding":
        rows = min(I[1].shape[0], EMBED_ROWS)
        tok = tensor(I[0], "index", high=rows)
        w = tensor(I[1], shape=(rows, I[1].shape[1]))
        out = O[0]
        return lambda: put(out.name, F.embedding(env[tok], env[w]).view(out.shape))
    if name == "rmsnorm":
        x = tensor(I[0])
        wn = f"{op.node}.norm_weight"
        env.setdefault(wn, _alloc(torch, (I[0].shape[-1],), dtype, device))
        out = O[0]
        return lambda: put(out.name, _rms(torch, env[x], env[wn]))
    if name == "add":
        a, b = tensor(I[0]), tensor(I[1])
        return lambda: put(O[0].name, env[a] + env[b])
    if name == "qkv_proj":
        h, w = tensor(I[0]), tensor(I[1])
        b = tensor(I[2]) if len(I) > 2 else None
        q, k, v = O
        nq, nk = q.shape[-2], k.shape[-2]
        H = I[1].shape[0]
        qk_norm = bool(op.attr("qk_norm"))
        dn = f"{op.node}.qk_norm_weight"
        if qk_norm:
            env.setdefault(dn, _alloc(torch, (q.shape[-1],), dtype, device))

        def run():
            x = env[h].reshape(-1, H) @ env[w].reshape(H, -1)
            if b is not None:
                x = x + env[b].reshape(-1)
            x = x.view(*q.shape[:-2], nq + 2 * nk, q.shape[-1])
            qq, kk, vv = x[..., :nq, :], x[..., nq:nq + nk, :], x[..., nq + nk:, :]
            if qk_norm:
                qq, kk = _rms(torch, qq, env[dn]), _rms(torch, kk, env[dn])
            put(q.name, qq)
            put(k.name, kk)
            put(v.name, vv)
        return run
    if name == "kv_append" and len(I) == 1:  # MLA: one latent (with its rope key) per token
        c, kv = tensor(I[0]), O[0]
        slot = f"{kv.name}.slot"
        env.setdefault(slot, _alloc(torch, (kv.shape[0], 2, kv.shape[-1]), dtype, device))

        def run_latent():
            env[slot][:, 1] = env[c].reshape(kv.shape[0], -1, kv.shape[-1])[:, -1]
        return run_latent
    if name == "kv_append":
        k, v = tensor(I[0]), tensor(I[1])
        kv = O[0]
        Bsz, _, hkv, _, d = kv.shape
        slot = f"{kv.name}.slot"  # appending one token does not depend on the cache length
        env.setdefault(slot, _alloc(torch, (Bsz, 2, hkv, 2, d), dtype, device))

        def run():
            env[slot][:, 1, :, 0] = env[k][:, -1]
            env[slot][:, 1, :, 1] = env[v][:, -1]
        return run
    if name == "flash_attention":
        q, kv = I[0], I[1]
        qn = tensor(q)
        Bsz, ctx, hkv, _, d = kv.shape
        hq = q.shape[-2]
        kn, vn = f"{kv.name}.k", f"{kv.name}.v"
        env.setdefault(kn, _alloc(torch, (Bsz, hkv, ctx, d), dtype, device))
        env.setdefault(vn, _alloc(torch, (Bsz, hkv, ctx, d), dtype, device))
        o_part, lse = O[0], O[1]
        gqa = hq != hkv
        if gqa and hq % hkv:
            raise ValueError(f"{op.node}: {hq} query heads do not group over {hkv} KV heads")
        if device.type != "meta":
            env.setdefault(lse.name, torch.zeros(lse.shape, dtype=torch.float32, device=device))

        def run():
            qh = env[qn].transpose(1, 2)  # (B, Hq, Tq, d)
            out = F.scaled_dot_product_attention(qh, env[kn], env[vn], enable_gqa=gqa)
            put(o_part.name, out.transpose(1, 2).reshape(o_part.shape))
        return run
    if name == "attn_combine":
        o_in, lse_in = tensor(I[0]), tensor(I[1])
        out = O[0]
        r = max(1, I[0].shape[-1] // out.shape[-1])
        hq = I[1].shape[-1]

        def run():
            x = env[o_in].reshape(*out.shape[:-1], r, out.shape[-1])
            s = env[lse_in].float()
            if hq % r == 0:
                w = torch.softmax(s.reshape(*out.shape[:-1], r, hq // r).amax(-1), dim=-1)
            else:
                w = torch.full((*out.shape[:-1], r), 1.0 / r, device=s.device)
            put(out.name, (x * w.unsqueeze(-1).to(x.dtype)).sum(-2))
        return run
    if name in ("o_proj", "lm_head"):
        x, w = tensor(I[0]), tensor(I[1])
        out = O[0]
        K = I[1].shape[0]
        return lambda: put(out.name, (env[x].reshape(-1, K) @ env[w]).view(out.shape))
    if name == "router":
        x, w = tensor(I[0]), tensor(I[1])
        out = O[0]
        K, k = I[1].shape[0], out.shape[-1]

        def run():
            logits = env[x].reshape(-1, K) @ env[w]
            put(out.name, torch.softmax(logits.topk(k, dim=-1).values.float(), dim=-1).view(out.shape))
        return run
    if name == "expert_swiglu":
        h = tensor(I[0])
        tensor(I[2])  # the gates select the experts; their values do not change the work
        wt = I[1]
        _, _, H, W = wt.shape
        e_loc, t_exp = values["E_loc"], values["T_exp"]  # active experts on this rank, tokens each (B.2)
        y = O[0]
        rows_in = math.prod(I[0].shape[:-1])
        wn = f"{wt.name}.active"
        if e_loc:
            env.setdefault(wn, _alloc(torch, (e_loc, 3, H, W), dtype, device))
        bn = f"{wt.name}.bias"
        if e_loc and op.attr("bias"):
            env.setdefault(bn, _alloc(torch, (e_loc, 2 * W + H), dtype, device))
        idx = f"{op.node}.token_rows"
        if device.type != "meta":
            env.setdefault(idx, torch.arange(e_loc * t_exp, device=device) % max(1, rows_in))
        if device.type != "meta" and y.name not in env:
            env[y.name] = torch.zeros(y.shape, dtype=dtype, device=device)

        def run():
            if not e_loc:
                env[y.name].zero_()
                return
            wts = env[wn]
            xs = env[h].reshape(-1, H).index_select(0, env[idx]).view(e_loc, t_exp, H)
            g = torch.bmm(xs, wts[:, 0])
            u = torch.bmm(xs, wts[:, 1])
            if op.attr("bias"):
                bias = env[bn]
                g, u = g + bias[:, None, :W], u + bias[:, None, W:2 * W]
            o = torch.bmm(F.silu(g) * u, wts[:, 2].transpose(1, 2))
            if op.attr("bias"):
                o = o + env[bn][:, None, 2 * W:]
            n = min(y.shape[0], e_loc * t_exp)
            env[y.name][:n] = o.reshape(-1, H)[:n]
        return run
    if name == "expert_combine":
        y, gate = tensor(I[0]), tensor(I[1])
        out = O[0]
        rows, H = I[0].shape
        tokens = math.prod(out.shape[:-1])
        gsize = math.prod(I[1].shape)
        ti, gi = f"{op.node}.tok", f"{op.node}.gate_idx"
        if device.type != "meta":
            env.setdefault(ti, torch.arange(rows, device=device) % tokens)
            env.setdefault(gi, torch.arange(rows, device=device) % gsize)

        def run():
            w = env[gate].reshape(-1).index_select(0, env[gi]).to(env[y].dtype)
            f = torch.zeros(tokens, H, dtype=env[y].dtype, device=env[y].device)
            put(out.name, f.index_add_(0, env[ti], env[y] * w[:, None]).view(out.shape))
        return run
    if name == "matmul":
        return _matmul_step(torch, F, op, env, tensor)
    if name == "latent_attention":
        return _latent_attention_step(torch, F, op, env, tensor, dtype, device)
    if name == "latent_combine":
        return _latent_combine_step(torch, op, env, tensor)
    if name == "sample":
        return lambda: None
    raise ValueError(f"no torch implementation for node op {name!r} ({op.node})")


def _matmul_step(torch, F, op: OpShape, env: dict, tensor):
    """A graph ``matmul`` by its weight's dims: ``(mat3, H, F)`` a SwiGLU MLP (dense FFN, shared
    experts); a weight whose leading dim is a head dim the output keeps, one GEMM per head (MLA's
    q_absorb, whose query rope part passes through, and v_up); otherwise one GEMM contracting the
    weight's leading dims with the activation's trailing ones (q_down, q_up, kv_down, MLA o_proj)."""
    x_t, w_t, out = op.inputs[0], op.inputs[1], op.outputs[0]
    x, w = tensor(x_t), tensor(w_t)
    wd, xd, od = w_t.dims, x_t.dims, out.dims
    if wd[0] == "mat3":
        H = w_t.shape[1]

        def swiglu():
            h = env[x].reshape(-1, H)
            g, u = h @ env[w][0], h @ env[w][1]
            put(env, out.name, ((F.silu(g) * u) @ env[w][2].transpose(0, 1)).view(out.shape))
        return swiglu
    if wd[0] in od and wd[0] in xd:
        heads, k_in, n_out = w_t.shape
        rest = out.shape[-1] - n_out  # MLA: the rope dims of the query join the absorbed latent

        def per_head():
            xv = env[x].reshape(-1, heads, x_t.shape[-1])
            y = torch.einsum("nhk,hkr->nhr", xv[..., :k_in], env[w])
            if rest > 0:
                y = torch.cat([y, xv[..., x_t.shape[-1] - rest:]], dim=-1)
            put(env, out.name, y.reshape(out.shape))
        return per_head
    k = next(i for i in range(len(wd), 0, -1) if tuple(wd[:i]) == tuple(xd[-i:]))
    K = math.prod(w_t.shape[:k])
    return lambda: put(env, out.name, (env[x].reshape(-1, K) @ env[w].reshape(K, -1)).view(out.shape))


def _latent_attention_step(torch, F, op: OpShape, env: dict, tensor, dtype, device):
    """MLA decode over the latent cache (absorbed form, as FlashMLA): every query head attends to the
    one latent of C = kv_lora_rank + rope dims; values are the latent's first R dims. As for
    flash-decode, the log-sum-exp output is not computed."""
    q_t, kv_t = op.inputs[0], op.inputs[1]
    o_part, lse = op.outputs
    qn, kvn = tensor(q_t), tensor(kv_t)
    Bsz, C, R = q_t.shape[0], q_t.shape[-1], o_part.shape[-1]
    if device.type != "meta":
        env.setdefault(lse.name, torch.zeros(lse.shape, dtype=torch.float32, device=device))

    def run():
        q = env[qn].reshape(Bsz, 1, -1, C)  # all query heads of a user against its single latent "head"
        kv = env[kvn].reshape(Bsz, 1, -1, C)
        out = F.scaled_dot_product_attention(q, kv, kv[..., :R])
        put(env, o_part.name, out.reshape(o_part.shape))
    return run


def _latent_combine_step(torch, op: OpShape, env: dict, tensor):
    """Helix rescale-combine of MLA's KVP partial outputs (one value per head and partial)."""
    o_in, lse_in = tensor(op.inputs[0]), tensor(op.inputs[1])
    out = op.outputs[0]
    r = max(1, op.inputs[0].numel // out.numel)
    lead, R = out.shape[:-1], out.shape[-1]
    stats_per_partial = op.inputs[1].numel // r

    def run():
        x = env[o_in].reshape(r, *lead, R)
        s = env[lse_in].float().reshape(r, -1)
        w = torch.softmax(s.amax(-1), dim=0) if stats_per_partial else torch.full((r,), 1.0 / r, device=s.device)
        put(env, out.name, (x * w.view(r, *([1] * (len(lead) + 1))).to(x.dtype)).sum(0))
    return run


def put(env: dict, key: str, value) -> None:
    env[key] = value


# ---- timing ------------------------------------------------------------------------------------

def time_kernel(torch, fn, device, *, warmup: int, repeats: int, min_sample_s: float = 1e-3,
                max_calls: int = 1000, use_graphs: bool = True) -> dict:
    """Median seconds per call of ``fn`` (see module doc for the method per device)."""
    for _ in range(max(1, warmup)):
        fn()
    if device.type == "cuda":
        return _time_cuda(torch, fn, device, repeats, min_sample_s, max_calls, use_graphs)
    t0 = time.perf_counter()
    fn()
    single = max(time.perf_counter() - t0, 1e-7)
    calls = int(min(max_calls, max(1, math.ceil(min_sample_s / single))))
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - t0) / calls)
    return {"median_s": statistics.median(samples), "min_s": min(samples), "calls_per_sample": calls,
            "samples": len(samples), "method": "perf_counter"}


def _time_cuda(torch, fn, device, repeats, min_sample_s, max_calls, use_graphs) -> dict:
    torch.cuda.synchronize(device)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    torch.cuda.synchronize(device)
    single = max(start.elapsed_time(end) / 1e3, 1e-7)
    calls = int(min(max_calls, max(1, math.ceil(min_sample_s / single))))
    run, method = None, "cuda events, eager"
    if use_graphs:
        try:
            stream = torch.cuda.Stream(device)
            stream.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(stream):
                for _ in range(2):
                    fn()
            torch.cuda.current_stream(device).wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for _ in range(calls):
                    fn()
            run, method = graph.replay, "cuda events, CUDA-graph replay"
        except Exception:  # noqa: BLE001 - capture can fail for some ops; eager timing still measures
            torch.cuda.synchronize(device)
            run = None
    if run is None:
        def run():
            for _ in range(calls):
                fn()
    run()
    samples = []
    for _ in range(repeats):
        start.record()
        run()
        end.record()
        torch.cuda.synchronize(device)
        samples.append(start.elapsed_time(end) / 1e3 / calls)
    return {"median_s": statistics.median(samples), "min_s": min(samples), "calls_per_sample": calls,
            "samples": len(samples), "method": method}
