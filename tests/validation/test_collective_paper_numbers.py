"""Paper 003 numbers from the closed forms: Table 4 (exact), Figure 17, Table 7, Eq. 3, Table 6.

Tolerances from reference/paper-numbers.md. Nothing here is tuned: every number is computed from
the closed forms (which the conformance suite proves equal to executed schedules).
"""

from fractions import Fraction

import pytest

from collectives.schedules import lookup
from collectives.selection import best_schedule, hockney_time_s
from collectives.topology import block_fold, folded_cube, hypercube, min_phases_lower_bound, with_folds

LAM = 0.52e-6
R = 5e10  # 400 Gb/s
KiB = 1024

# (topology, (deg, diam), min h, {schedule: (h, v/sigma)})  — Table 4, exact
TABLE4 = [
    (hypercube(3), (3, 3), 3, {"recursive_doubling": (3, 3), "one_shot": (3, 12), "coset_factored": (3, 3),
                               "coset_factored_parallel": (3, 1)}),
    (folded_cube(3), (4, 2), 2, {"recursive_doubling": (3, 3), "one_shot": (2, 6), "coset_factored": (2, 2),
                                 "coset_factored_parallel": (2, 1)}),
    (hypercube(4), (4, 4), 4, {"recursive_doubling": (4, 4), "one_shot": (4, 32), "coset_factored": (4, 4),
                               "coset_factored_parallel": (4, 1)}),
    (with_folds(hypercube(4), [0b1100]), (5, 3), 3,
     {"recursive_doubling": (4, 4), "one_shot": (3, 20), "coset_factored": (3, 3), "coset_factored_parallel": (3, 1)}),
    (with_folds(hypercube(4), [0b1111]), (5, 2), 2,
     {"recursive_doubling": (4, 4), "one_shot": (2, 7), "coset_factored": (3, 3), "coset_factored_parallel": (3, 1)}),
]


@pytest.mark.parametrize("topo, deg_diam, min_h, cells", TABLE4, ids=[t[0].describe() for t in TABLE4])
def test_table4_exact(topo, deg_diam, min_h, cells):
    assert (topo.degree, topo.diameter) == deg_diam
    assert min_phases_lower_bound(topo) == min_h
    for name, (h, v) in cells.items():
        cost = lookup("allreduce", name).closed_form(topo)
        assert (cost.h, cost.v) == (h, Fraction(v)), name


def test_figure17_latency_terms_on_q9():
    q9 = hypercube(9)
    for name in ("rs_ag", "rs_ag_parallel"):
        h = lookup("allreduce", name).closed_form(q9).h
        assert h == 18 and abs(h * LAM - 9.36e-6) < 1e-12  # "18 x 0.52 = 9.4 us"
    for name in ("one_shot", "one_shot_dvo", "coset_factored", "coset_factored_parallel"):
        h = lookup("allreduce", name).closed_form(q9).h
        assert h == 9 and abs(h * LAM - 4.68e-6) < 1e-12  # "9 x 0.52 = 4.7 us"
    # 'their parallel variants ... send 9 times less data on the most loaded link'
    assert lookup("allreduce", "rs_ag").closed_form(q9).v == 9 * lookup("allreduce", "rs_ag_parallel").closed_form(q9).v
    assert lookup("allreduce", "coset_factored").closed_form(q9).v == 9 * lookup(
        "allreduce", "coset_factored_parallel").closed_form(q9).v


def test_figure17_one_shot_slowest_at_every_size():
    q9 = hypercube(9)
    names = ("one_shot", "one_shot_dvo", "coset_factored", "coset_factored_parallel", "rs_ag", "rs_ag_parallel")
    for size in (2**k for k in range(10, 25)):
        times = {n: hockney_time_s(lookup("allreduce", n).closed_form(q9), size, LAM, R) for n in names}
        assert max(times, key=times.get) == "one_shot"


SIGMA_T7 = 640_000 * KiB


def test_table7_ring_on_q5_subcube_p7():
    cost = lookup("allreduce", "ring").closed_form(hypercube(5))  # Gray-code cycle of the Q5
    assert cost.u == 2  # 'driving only 2 of the 5 links per node'
    assert hockney_time_s(cost, SIGMA_T7, LAM, R, multiplicity=7) * 1e6 == pytest.approx(3660, abs=1)


def test_table7_ring_single_mesh_p17():
    from collectives.topology import ring

    cost = lookup("allreduce", "ring").closed_form(ring(32))
    assert hockney_time_s(cost, SIGMA_T7, LAM, R, multiplicity=17) * 1e6 == pytest.approx(1526, abs=1)


def test_table7_parallel_rs_ag_on_q5_p7():
    q5 = hypercube(5)
    cost = lookup("allreduce", "rs_ag_parallel").closed_form(q5)
    assert cost.u == 5  # drives all d links of the cube in every phase
    assert hockney_time_s(cost, SIGMA_T7, LAM, R, multiplicity=7) * 1e6 == pytest.approx(731, abs=1)
    assert best_schedule("allreduce", q5, SIGMA_T7, LAM, R, multiplicity=7) == "rs_ag_parallel"


def test_eq3_fold_vs_multiplicity_crossover():
    """Q6 (h=6, p=1); +fold to Q6[2,2,2] (h=3, d=9); +multiplicity p=2 (h=6). Coset-factored
    parallel. The crossover sigma* where +fold and +multiplicity take equal time is 156 kB."""
    cfp = lookup("allreduce", "coset_factored_parallel")
    fold, base = cfp.closed_form(block_fold((2, 2, 2))), cfp.closed_form(hypercube(6))
    assert (base.h, fold.h, fold.u) == (6, 3, 9)
    # T_fold(s) = T_mult(s):  h_f*lam + v_f*s/R = h_b*lam + v_b*s/(2R), solved exactly
    sigma_star = (base.h - fold.h) * LAM / (float(fold.v) / R - float(base.v) / (2 * R))
    assert sigma_star / 1e3 == pytest.approx(156, abs=0.5)
    below, above = 0.9 * sigma_star, 1.1 * sigma_star
    assert hockney_time_s(fold, below, LAM, R) < hockney_time_s(base, below, LAM, R, 2)
    assert hockney_time_s(fold, above, LAM, R) > hockney_time_s(base, above, LAM, R, 2)


@pytest.mark.parametrize(
    "topo, size, expect_us, expect_h",
    [
        (block_fold((2,)), 4 * KiB, 0.60, 1),  # axis 4 -> K4, one-shot (vol.-opt.) tie
        (block_fold((3, 3)), 32 * KiB, 1.70, 2),  # axis 64 -> K8□K8, coset-factored parallel
        (block_fold((2, 2)), 4 * KiB, 1.12, 2),  # (16,16) axis -> K4□K4
        (block_fold((3, 1)), 4 * KiB, 1.12, 2),  # (16,16) axis -> K8□K2
    ],
)
def test_table6_per_axis_times(topo, size, expect_us, expect_h):
    best = best_schedule("allreduce", topo, size, LAM, R)
    cost = lookup("allreduce", best).closed_form(topo)
    assert cost.h == expect_h
    assert hockney_time_s(cost, size, LAM, R) * 1e6 == pytest.approx(expect_us, abs=0.01)
    if topo.n_ranks == 4:
        dvo = lookup("allreduce", "one_shot_dvo").closed_form(topo)
        assert hockney_time_s(dvo, size, LAM, R) == pytest.approx(hockney_time_s(cost, size, LAM, R))
    if topo.n_ranks == 64:
        assert best == "coset_factored_parallel"


def test_table6_total_is_4_54_us():
    axes = [(block_fold((2,)), 4 * KiB), (block_fold((3, 3)), 32 * KiB), (block_fold((2, 2)), 4 * KiB),
            (block_fold((3, 1)), 4 * KiB)]
    total = sum(hockney_time_s(lookup("allreduce", best_schedule("allreduce", t, s, LAM, R)).closed_form(t), s, LAM, R)
                for t, s in axes)
    assert total * 1e6 == pytest.approx(4.54, abs=0.01)
