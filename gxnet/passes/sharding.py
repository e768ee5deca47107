"""Sharding pass (B.1 step 3): placements and per-rank shapes for Helix or plain TP/EP.

Helix (Figure 26): attention on the KVP x TPA mesh -- Q/K/V weights and heads split over TPA,
the KV cache split by sequence over KVP and by KV head over TPA; each rank's flash-decode emits
partial outputs and log-sum-exp statistics (partial-softmax over KVP), which the combine needs
split by head dim over KVP instead; the output projection is row-parallel over all ranks
(partial sum over the world). FFN on the EP x TPE mesh: experts over EP, expert width over TPE;
the expert output is the busiest EP rank's padded rows (B.2), a partial sum over TPE. The LM
head is vocabulary-sharded over the world.

tp_ep: attention heads split over the whole mesh ("world", KV heads replicated when fewer than
ranks), no KV sequence split; FFN experts over EP and width over TP.

dp_attention: attention replicated over DPA groups that each serve their own users (batch split
over ``dpa``), heads over the group's TPA ranks; FFN as tp_ep on all tokens (experts over EP,
width over TPE). See ``_dp_attention_placements``.

MLA (DeepSeek-V3): query heads split like GQA heads; the latent KV cache has no head dim, so TP
over heads replicates it and KVP splits it by sequence.

Each node records in ``attrs["requires"]`` the placement it needs for inputs whose producer
placement differs; ``insert_collectives`` turns every such mismatch into collectives.
"""

from __future__ import annotations

from dataclasses import replace

import sympy as sp

from collectives.errors import SpecError
from gxnet.ir import AXIS_SIZE, REPLICATED, KVP, TPA, Graph, Placement, R_rows, TensorType, base_name, frozen

P = Placement


_base = base_name


def _helix_placements() -> dict[str, Placement]:
    return {
        "w_qkv": P((("Hqkv", ("tpa",)),)), "b_qkv": P((("Hqkv", ("tpa",)),)),
        "q": P((("Hq", ("tpa",)),)), "k": P((("Hkv", ("tpa",)),)), "v": P((("Hkv", ("tpa",)),)),
        "kv": P((("S", ("kvp",)), ("Sw", ("kvp",)), ("Hkv", ("tpa",)))),
        "sinks": P((("Hq", ("tpa",)),)),
        "o_part": P((("A", ("tpa",)),), ("kvp",), "softmax"),
        "lse": P((("Hq", ("tpa",)),), ("kvp",), "softmax"),
        "o": P((("A", ("tpa", "kvp")),)),
        "w_o": P((("A", ("tpa", "kvp")), ("Hq", ("tpa", "kvp")))),
        "a": P((), ("kvp", "tpa"), "sum"),
        "w_experts": P((("E", ("ep",)), ("W", ("tpe",)))), "b_experts": P((("E", ("ep",)),)),
        "y": P((("Rw", ("ep",)),), ("tpe",), "sum"),
        "w_lm": P((("V", ("world",)),)), "logits": P((("V", ("world",)),)),
        **_mla_helix(), **_ffn_extra("tpe"),
    }


def _mla_helix() -> dict[str, Placement]:
    # MLA under Helix: query heads over TPA; the latent (one for all heads) is replicated over
    # TPA and split by sequence over KVP; after the KVP all-to-all the heads split over TPA x KVP.
    hq_t, hq_w = P((("Hq", ("tpa",)),)), P((("Hq", ("tpa", "kvp")),))
    return {"w_qb": hq_t, "w_uk": hq_t, "ql": hq_t,
            "ol_part": P((("Hq", ("tpa",)),), ("kvp",), "softmax"),
            "ol": hq_w, "w_uv": hq_w, "ov": hq_w}


def _ffn_extra(tensor_axis: str) -> dict[str, Placement]:
    # Shared experts: width over the FFN tensor axis (replicated over EP); dense FFN layers:
    # width over all ranks (row-parallel down projection -> partial sum over the world).
    return {"w_shared": P((("Ws", (tensor_axis,)),)), "s": P((), (tensor_axis,), "sum"),
            "w_dense": P((("F", ("world",)),)), "fd": P((), ("world",), "sum")}


def _tp_ep_placements() -> dict[str, Placement]:
    return {
        "w_qkv": P((("Hqkv", ("world",)),)), "b_qkv": P((("Hqkv", ("world",)),)),
        "q": P((("Hq", ("world",)),)), "k": P((("Hkv", ("world",)),)), "v": P((("Hkv", ("world",)),)),
        "kv": P((("Hkv", ("world",)),)), "sinks": P((("Hq", ("world",)),)),
        "o_part": P((("A", ("world",)),)), "lse": P((("Hq", ("world",)),)),
        "o": P((("A", ("world",)),)), "w_o": P((("A", ("world",)), ("Hq", ("world",)))),
        "a": P((), ("world",), "sum"),
        "w_experts": P((("E", ("ep",)), ("W", ("tp",)))), "b_experts": P((("E", ("ep",)),)),
        "y": P((("Rw", ("ep",)),), ("tp",), "sum"),
        "w_lm": P((("V", ("world",)),)), "logits": P((("V", ("world",)),)),
        # MLA: heads over all ranks, the latent cache replicated (it has no head dim)
        **{t: P((("Hq", ("world",)),)) for t in ("w_qb", "w_uk", "ql", "ol_part", "ol", "w_uv", "ov")},
        **_ffn_extra("tp"),
    }


def _dp_attention_placements() -> dict[str, Placement]:
    """Attention data-parallel over DPA groups (SGLang/vLLM DP-attention): each group serves its
    own B/DPA users (activations and KV cache split by batch over ``dpa``), heads split over the
    group's ``tpa`` ranks; the residual stream is replicated, so the attention output is
    all-reduced over TPA and all-gathered over DPA before the FFN, which runs on every token
    with experts over EP and width over TPE."""
    b = ("B", ("dpa",))
    heads = {"Hq": ("tpa",), "Hkv": ("tpa",), "A": ("tpa",), "Hqkv": ("tpa",)}

    def act(*dims):
        return P((b,) + tuple((d, heads[d]) for d in dims))

    out = {name: act() for name in ("h", "qa", "c")}
    out.update({"q": act("Hq"), "k": act("Hkv"), "v": act("Hkv"), "kv": act("Hkv"), "o_part": act("A"),
                "lse": act("Hq"), "o": act("A"), "ql": act("Hq"), "ol_part": act("Hq"), "ol": act("Hq"),
                "ov": act("Hq"), "a": P((b,), ("tpa",), "sum")})
    out.update({w: P((("Hqkv", ("tpa",)),)) for w in ("w_qkv", "b_qkv")})
    out.update({w: P((("Hq", ("tpa",)),)) for w in ("sinks", "w_qb", "w_uk", "w_uv")})
    out["w_o"] = P((("A", ("tpa",)), ("Hq", ("tpa",))))
    out.update({
        "w_experts": P((("E", ("ep",)), ("W", ("tpe",)))), "b_experts": P((("E", ("ep",)),)),
        "y": P((("Rw", ("ep",)),), ("tpe",), "sum"),
        "w_lm": P((("V", ("world",)),)), "logits": P((("V", ("world",)),)),
        **_ffn_extra("tpe"),
    })
    return out


# Inputs whose consumer needs a different placement than the producer gives: (op, input base).
_FFN_REQUIRES = {("expert_combine", "s"): REPLICATED, ("add", "fd"): REPLICATED}
_REQUIRES = {
    "helix": {
        ("attn_combine", "o_part"): P((("A", ("tpa", "kvp")),)),
        ("attn_combine", "lse"): P((("Hq", ("tpa",)),)),
        ("add", "a"): REPLICATED,
        ("expert_combine", "y"): REPLICATED,
        ("sample", "logits"): REPLICATED,
        ("latent_combine", "ol_part"): P((("Hq", ("tpa", "kvp")),)),
        ("latent_combine", "lse"): P((("Hq", ("tpa", "kvp")),)),
        **_FFN_REQUIRES,
    },
    "tp_ep": {
        ("add", "a"): REPLICATED,
        ("expert_combine", "y"): REPLICATED,
        ("sample", "logits"): REPLICATED,
        **_FFN_REQUIRES,
    },
    "dp_attention": {
        ("add", "a"): REPLICATED,  # all-reduce over TPA, then all-gather over DPA
        ("expert_combine", "y"): REPLICATED,
        ("sample", "logits"): REPLICATED,
        **_FFN_REQUIRES,
    },
}


def axis_size(axes: tuple[str, ...]) -> sp.Expr:
    return sp.Mul(*(AXIS_SIZE[a] for a in axes))


def local_size(dim: str, size: sp.Expr, axes: tuple[str, ...], scheme: str) -> tuple[sp.Expr, bool]:
    """Per-rank size of ``dim`` sharded over ``axes``; the flag says it is padded, not even."""
    if not axes:
        return size, False
    n = axis_size(axes)
    if dim == "Rw":  # B.2: buffers padded to the busiest EP rank's rows
        return R_rows, True
    if dim in ("S", "Sw", "V"):  # context shards and vocabulary shards: ceil, last shard padded
        return sp.ceiling(size / n), True
    if scheme != "helix" and dim == "Hkv":  # KV heads replicated when fewer than ranks
        return sp.Max(1, sp.ceiling(size / n)), True
    return size / n, False


_TABLES = {"helix": _helix_placements, "tp_ep": _tp_ep_placements, "dp_attention": _dp_attention_placements}
_HEAD_AXIS = {"tp_ep": "world", "dp_attention": "tpa"}  # the axis attention heads split over


def shard(g: Graph, scheme: str) -> Graph:
    if scheme not in _REQUIRES:
        raise SpecError(f"unknown parallel scheme {scheme!r}; choose one of: {', '.join(_REQUIRES)}")
    table = _TABLES[scheme]()
    tensors: dict[str, TensorType] = {}
    for name, t in g.tensors.items():
        pl = table.get(_base(name), REPLICATED)
        pl = Placement(tuple((d, a) for d, a in pl.shards if d in t.dims), pl.partial, pl.partial_kind)
        local, padded = [], []
        for dim, size in zip(t.dims, t.shape):
            ls, pad = local_size(dim, size, pl.axes_of(dim), scheme)
            if scheme != "helix" and dim == "Hqkv":  # q heads split, k/v heads maybe replicated
                ls, pad = _tp_ep_qkv_local(g, t, _HEAD_AXIS[scheme]), True
            local.append(ls)
            if pad:
                padded.append(dim)
        tensors[name] = replace(t, placement=pl, local_shape=tuple(local), padded=tuple(padded))

    reqs = _REQUIRES[scheme]

    def annotate(sec, node):
        need = {}
        for inp in node.inputs:
            want = reqs.get((node.op, _base(inp)))
            if want is not None:
                dims = tensors[inp].dims
                want = Placement(tuple((d, a) for d, a in want.shards if d in dims), want.partial, want.partial_kind)
            if want is not None and want != tensors[inp].placement:
                need[inp] = want
        return node.with_attrs(requires=frozen(need)) if need else node

    out = g.with_tensors(tensors).map_nodes(annotate)
    return out.with_attrs(scheme=scheme, world=KVP * TPA)


def _tp_ep_qkv_local(g: Graph, t: TensorType, axis: str) -> sp.Expr:
    # Hqkv = Hq + 2 Hkv; recover Hq and Hkv from the q/k tensors of the same layer.
    q = next(tt for n, tt in g.tensors.items() if _base(n) == "q")
    k = next(tt for n, tt in g.tensors.items() if _base(n) == "k")
    hq, hkv = q.shape[q.dims.index("Hq")], k.shape[k.dims.index("Hkv")]
    n = AXIS_SIZE[axis]
    return hq / n + 2 * sp.Max(1, sp.ceiling(hkv / n))
