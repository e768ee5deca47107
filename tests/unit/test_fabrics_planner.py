"""Planner pieces: requests, ladders, multiplicities, logical-only axes, stacked-link split."""

import pytest
from hypothesis import given, settings, strategies as st

from collectives.errors import SpecError
from fabrics.planner import plan, request_from_dict, request_hash, shared_host_plan, stacked_link_plan
from fabrics.planner.axis_cost import complete_blocks, compress, expand, expanded_masks
from fabrics.planner.stacked_link import best_circulant, port_split

R, LAM = 5e10, 0.52e-6


def req(meshes, world=64, ports=12, allocation="shared_host"):
    return request_from_dict(world=world, ports=ports, link_rate_Bps=R, hop_latency_s=LAM, meshes=meshes,
                             allocation=allocation)


@pytest.mark.parametrize("meshes, world, ports, fragment", [
    ([{"shape": [4, 8], "payloads": [1, 1]}], 64, 12, "spans 32 ranks"),
    ([{"shape": [4, 16], "payloads": [1]}], 64, 12, "one payload"),
    ([{"shape": [6, 8], "payloads": [1, 1]}], 48, 12, "power of two"),
    ([{"shape": [8, 8], "payloads": [1, 1]}], 64, 5, "log2"),
    ([{"shape": [8, 8], "payloads": ["4KiB", 1]}], 64, 12, "numbers"),
    ([{"shape": [8, 8], "payloads": [1, 1], "colour": 3}], 64, 12, "unknown mesh key"),
    ([{"shape": [8, 8], "collective": "broadcast", "payloads": [1, 1]}], 64, 12, "unknown"),
    ([], 64, 12, "empty"),
])
def test_bad_requests(meshes, world, ports, fragment):
    with pytest.raises(SpecError, match=fragment):
        req(meshes, world=world, ports=ports)


def test_masks_compress_and_expand():
    bits = (1, 4, 6)
    assert compress(0b1010010, bits) == 0b111 and expand(0b101, bits) == 0b1000010
    # by definition, bit by bit, on every mask of 9 host bits (bits outside the block are ignored)
    for bits in ((), (0,), (1, 4, 6), (0, 2, 3, 5, 8), (3, 1, 7), tuple(range(9))):
        for mask in range(1 << 9):
            assert compress(mask, bits) == sum(1 << i for i, b in enumerate(bits) if mask >> b & 1)
            assert expand(mask, bits) == sum(1 << b for i, b in enumerate(bits) if mask >> i & 1)
            assert compress(expand(mask, bits), bits) == mask & ((1 << len(bits)) - 1)
        assert expanded_masks(bits) == tuple(expand(x, bits) for x in range(1 << len(bits)))
    assert complete_blocks(4, [1, 2, 3, 4, 8, 12]) == (2, 2)
    assert complete_blocks(4, [1, 2, 4, 8, 15]) is None


def _submasks(blocks) -> set:
    """The non-zero submasks of the blocks' bit masks."""
    masks = [sum(1 << b for b in block) for block in blocks]
    return {s for m in masks for s in range(1, m + 1) if s & m == s}


def _blocks_by_definition(n_bits: int, gens: set) -> tuple[int, ...] | None:
    """Sizes of the bit blocks (lowest bit first) whose non-zero submasks are exactly ``gens``."""
    for blocks in _bit_partitions(list(range(n_bits))):
        if _submasks(blocks) == gens:
            return tuple(len(block) for block in sorted(blocks, key=min))
    return None


def _bit_partitions(bits):
    if not bits:
        yield []
        return
    first, rest = bits[0], bits[1:]
    for part in _bit_partitions(rest):
        yield [[first], *part]
        for i in range(len(part)):
            yield [*part[:i], [first, *part[i]], *part[i + 1:]]


@settings(max_examples=300, deadline=None)
@given(n_bits=st.integers(0, 5), data=st.data())
def test_complete_blocks_agrees_with_its_definition(n_bits, data):
    if data.draw(st.booleans()) and n_bits:  # a block fold, perhaps with one mask dropped or added
        gens = _submasks(data.draw(st.sampled_from(list(_bit_partitions(list(range(n_bits)))))))
        if data.draw(st.booleans()):
            gens ^= {data.draw(st.integers(0, (2 << n_bits) - 1))}
    else:
        gens = set(data.draw(st.lists(st.integers(0, (2 << n_bits) - 1), max_size=12)))
    assert complete_blocks(n_bits, gens) == _blocks_by_definition(n_bits, gens)


def test_request_hash_is_stable_and_sensitive():
    a = req([{"shape": [8, 8], "payloads": [4096, 4096]}])
    b = req([{"shape": [8, 8], "payloads": [4096, 4096]}])
    c = req([{"shape": [8, 8], "payloads": [4096, 4097]}])
    assert request_hash(a) == request_hash(b) != request_hash(c)


def test_latency_bound_axis_gets_folds_bandwidth_bound_gets_multiplicity():
    small = shared_host_plan(req([{"shape": [64], "payloads": [1024]}], ports=14))
    big = shared_host_plan(req([{"shape": [64], "payloads": [64 * 2**20]}], ports=12))
    (s,), (b,) = small.axes, big.axes
    assert s.phases < 6 and s.multiplicity == 1  # folds cut phases
    assert b.multiplicity == 2 and b.topology == "Q6"  # 12 ports: a doubled cube beats any fold
    assert small.ports_used <= 14 and big.ports_used <= 12
    for p in (small, big):
        assert p.total_time_s == pytest.approx(sum(a.time_s for a in p.axes))


def test_logical_only_axis_takes_no_ports():
    p = shared_host_plan(req([{"shape": [4, 16], "collectives": ["none", "allreduce"], "payloads": [0, 4096]}],
                             ports=10))
    idle, busy = p.axes
    assert idle.schedule == "none" and idle.time_s == 0 and idle.degree == 0
    assert all(g & ~sum(1 << b for b in busy.bits) == 0 for g, _ in p.generators)  # only the busy axis's bits


def test_weights_scale_the_objective():
    one = shared_host_plan(req([{"shape": [8, 8], "payloads": [4096, 4096]}]))
    ten = shared_host_plan(req([{"shape": [8, 8], "payloads": [4096, 4096], "weights": [10, 10]}]))
    assert ten.total_time_s == pytest.approx(10 * one.total_time_s)


def test_requested_schedule_is_used():
    p = shared_host_plan(req([{"shape": [64], "payloads": [4096], "schedule": "rs_ag_parallel"}]))
    assert p.axes[0].schedule == "rs_ag_parallel"
    with pytest.raises(SpecError):
        shared_host_plan(req([{"shape": [64], "payloads": [4096], "schedule": "bruck"}]))


def test_port_split_largest_remainder():
    assert port_split([8, 64], 72) == [7, 63]  # fully connected: N_i − 1 each
    split = port_split([8, 64], 20)
    assert sum(split) == 20 and split[0] >= 1 and split[1] > split[0]
    with pytest.raises(SpecError):
        port_split([8, 8, 8], 2)


def test_best_circulant_minimises_diameter():
    ring = best_circulant(16, 2)
    assert ring.diameter == 8
    better = best_circulant(16, 4)
    assert better.degree == 4 and better.diameter < ring.diameter
    assert best_circulant(16, 15).is_complete


def test_stacked_link_plan_uses_one_shot_on_circulants():
    p = stacked_link_plan(req([{"shape": [8, 8], "payloads": [4096, 4096]}], ports=8, allocation="stacked_link"))
    assert p.allocation == "stacked_link" and p.ports_used <= 8
    assert {a.schedule for a in p.axes} <= {"one_shot", "one_shot_dvo"}


@given(st.sampled_from([(16,), (4, 4), (2, 8), (8, 2)]), st.integers(4, 12),
       st.lists(st.sampled_from([256, 4096, 1 << 20]), min_size=2, max_size=2))
@settings(max_examples=25, deadline=None)
def test_plans_respect_the_port_budget(shape, ports, payloads):
    meshes = [{"shape": list(shape), "collective": "allreduce", "payloads": payloads[:len(shape)]}]
    p = plan(req(meshes, world=16, ports=ports))
    assert p.ports_used <= ports
    assert p.ports_used == sum(m for _, m in p.generators)
    assert sum(1 for g in p.port_masks if g is not None) == p.ports_used
    # the plain cube is always available, so the plan is never worse than it
    for a in p.axes:
        assert a.phases <= a.size.bit_length() - 1 or a.schedule.startswith("rs_ag")
