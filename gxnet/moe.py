"""MoE load model (paper 003, Appendix B.2, Eqs. 7-8).

Dropless routing, uniform in expectation. With B users and top-k routing over N_exp experts,
N_act = round(N_exp (1 - (1 - 1/N_exp)^(B k))) distinct experts are active; they are spread
over the EP ranks, so a rank holds floor or ceil(N_act / EP) of them; its grouped GEMM runs
ceil(B k / N_act) tokens per active expert, and the collectives after the experts carry the
busiest rank's rows R = ceil(ceil(N_act / EP) * B k / N_act), rounded once per rank.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class MoeLoad:
    active_experts: int  # N_act
    tokens_per_expert: int  # ceil(B k / N_act)
    busiest_experts: int  # ceil(N_act / EP): active experts on the busiest EP rank
    lightest_experts: int  # floor(N_act / EP)
    busiest_ranks: int  # EP ranks holding busiest_experts (the rest hold lightest_experts)
    busiest_rows: int  # R: rows per EP rank in the TPE all-reduce / EP all-gather buffers


def active_experts(batch: int, top_k: int, experts: int) -> int:
    # Python's round() is banker's rounding; Eq. 7 rounds to the nearest integer (half up).
    x = experts * (1.0 - (1.0 - 1.0 / experts) ** (batch * top_k))
    return max(1, int(math.floor(x + 0.5)))


def moe_load(batch: int, top_k: int, experts: int, ep: int) -> MoeLoad:
    if experts == 0:  # dense model: no routed experts, every rank behaves alike
        return MoeLoad(active_experts=0, tokens_per_expert=0, busiest_experts=0, lightest_experts=0,
                       busiest_ranks=ep, busiest_rows=0)
    n_act = active_experts(batch, top_k, experts)
    bk = batch * top_k
    busiest = -(-n_act // ep)
    lightest = n_act // ep
    busiest_ranks = ep if busiest == lightest else n_act - lightest * ep
    return MoeLoad(
        active_experts=n_act,
        tokens_per_expert=-(-bk // n_act),
        busiest_experts=busiest,
        lightest_experts=lightest,
        busiest_ranks=busiest_ranks,
        busiest_rows=-(-(busiest * bk) // n_act),
    )
