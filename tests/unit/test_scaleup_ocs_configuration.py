"""OCS configuration: port permutations from Cayley generators, blocking configurations refused."""

import pytest

from collectives.errors import SpecError
from pipelines.network import fabric_from_dict
from fabrics.scaleup.allocation import linear_allocation
from fabrics.scaleup.ocs_configuration import configure_ocs, xor_port_permutations

R = 5e10


def test_all_ocs_blocking_configuration_is_rejected():
    # 16 down / 2 up cannot carry 16 circuits out
    f = fabric_from_dict({"kind": "all_ocs", "ports": 2, "link_rate": R, "down_ports": 16, "up_ports": 2}, world=64)
    alloc = linear_allocation(64)
    with pytest.raises(SpecError, match="up_ports"):
        configure_ocs(f, alloc, xor_port_permutations(64, {32: 1}, 2))


def test_generators_over_port_budget():
    with pytest.raises(SpecError, match="ports"):
        xor_port_permutations(64, {1: 5, 2: 5}, 8)


def test_a_port_that_is_not_a_permutation_is_named():
    f = fabric_from_dict({"kind": "all_ocs", "ports": 2, "link_rate": R, "down_ports": 8, "up_ports": 8}, world=16)
    good = tuple(x ^ 1 for x in range(16))
    with pytest.raises(SpecError, match="port 1: .*permutation of the 16 ranks"):
        configure_ocs(f, linear_allocation(16), [good, (0,) * 16])


def test_uplink_check_refuses_exactly_what_the_colouring_cannot_colour():
    """configure_ocs checks rack degrees at once (König) and colours uplinks only when the
    cross-connects are read: it must refuse exactly the permutations the colouring fails on, and
    every configuration it accepts must colour."""
    import numpy as np

    from fabrics.scaleup.colouring import colour_bipartite

    f = fabric_from_dict({"kind": "all_ocs", "ports": 2, "link_rate": R, "accelerators": 32, "down_ports": 8,
                          "switch_radix": 16, "up_ports": 6}, world=32)
    rng = np.random.default_rng(5)
    outcomes = set()
    for _ in range(40):
        perm = tuple(int(x) for x in rng.permutation(32))
        inter = [(x // 8, y // 8) for x, y in enumerate(perm) if x // 8 != y // 8]
        try:
            colour_bipartite(inter, 6)
            colourable = True
        except ValueError:
            colourable = False
        try:
            config = configure_ocs(f, linear_allocation(32), [perm, None])
        except SpecError as exc:
            assert not colourable and "port 0" in str(exc)
            outcomes.add(False)
            continue
        assert colourable and config.circuits() > 0  # reading the cross-connects colours them
        outcomes.add(True)
    assert outcomes == {True, False}
