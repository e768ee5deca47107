"""Table 6 (Appendix A.5.1): the worked shared-host plan, N = 256, L = 18, λ = 0.52 µs, R = 5e10 B/s."""

import pytest

from pipelines.network import fabric_from_dict
from fabrics.planner import clear_plan_cache, plan, request_from_dict
from fabrics.scaleup.allocation import linear_allocation
from fabrics.scaleup.ocs_configuration import configure_ocs
from fabrics.scaleup.paths import route

KiB = 1024
US = 1e-6


def table6_request():
    return request_from_dict(world=256, ports=18, link_rate_Bps=5e10, hop_latency_s=0.52e-6, meshes=[
        {"shape": [4, 64], "collective": "allreduce", "payloads": [4 * KiB, 32 * KiB]},
        {"shape": [16, 16], "collective": "allreduce", "payloads": [4 * KiB, 4 * KiB]}])


@pytest.fixture(scope="module")
def table6():
    clear_plan_cache()
    return plan(table6_request())


def test_total_time_and_ports(table6):
    assert table6.total_time_s == pytest.approx(4.54 * US, abs=0.01 * US)
    assert table6.ports_used == 17 and table6.ports == 18
    assert table6.host_degree == 17
    cube = [g for g, _ in table6.generators if g & (g - 1) == 0]
    assert len(cube) == 8 and table6.host_degree - len(cube) == 9  # 8 cube + 9 fold generators


@pytest.mark.parametrize("row, size, topology, degree, phases, time_us", [
    ((0, 0), 4, "K4", 3, 1, 0.60),
    ((0, 1), 64, "K8□K8", 14, 2, 1.70),
    ((1, 0), 16, "K4□K4", 6, 2, 1.12),
    ((1, 1), 16, "K8□K2", 8, 2, 1.12),
])
def test_per_axis_rows(table6, row, size, topology, degree, phases, time_us):
    ax = next(a for a in table6.axes if (a.mesh, a.axis) == row)
    assert (ax.size, ax.topology, ax.degree, ax.phases, ax.multiplicity) == (size, topology, degree, phases, 1)
    assert ax.time_s == pytest.approx(time_us * US, abs=0.01 * US)


def test_schedules(table6):
    by = {(a.mesh, a.axis): a.schedule for a in table6.axes}
    assert by[(0, 0)] == "one_shot_dvo"  # ties with coset-factored parallel (A.5.1)
    assert {by[(0, 1)], by[(1, 0)], by[(1, 1)]} == {"coset_factored_parallel"}


def test_folds_are_shared_across_meshes(table6):
    folds = {g for g, _ in table6.generators if g & (g - 1)}
    used_by_16x16 = {g for a in table6.axes if a.mesh == 1 for g in a.generators if g & (g - 1)}
    assert used_by_16x16 <= folds and len(used_by_16x16) == 6  # "9 folds, 6 shared" (Figure 12)


def test_plan_is_deterministic_and_cached(table6):
    again = plan(table6_request())
    assert again is table6  # cache hit by request hash
    clear_plan_cache()
    fresh = plan(table6_request())
    assert fresh == table6 and fresh.request_hash == table6.request_hash


def test_coloured_plan_configures_a_single_level_ocs(table6):
    """Each port carries one generator (a perfect matching); every axis edge gets its circuits."""
    assert sum(1 for g in table6.port_masks if g is not None) == table6.ports_used
    f = fabric_from_dict({"kind": "single_ocs", "ports": 18, "link_rate": 5e10}, world=256)
    alloc = linear_allocation(256)
    r = route(f, alloc, configure_ocs(f, alloc, table6.port_permutations()))
    for ax in table6.axes:
        for g in ax.generators:
            assert len(r.paths(5, 5 ^ g)) == ax.multiplicity
    assert r.latency_s(0, 1) == pytest.approx(0.52 * US)
