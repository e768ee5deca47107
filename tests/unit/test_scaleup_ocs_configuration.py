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
