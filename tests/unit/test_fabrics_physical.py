"""Physical fabrics: construction counts (Appendix C.7, Figure 25), config parsing, graph view."""

import networkx as nx
import pytest

from collectives.errors import SpecError
from fabrics.scaleup.physical import ACCELERATOR, EPS, OCS, FABRIC_KINDS, FabricSpec, build_fabric
from pipelines.network import fabric_from_dict, fabric_spec_from_dict

R = 5e10


def make(kind, world=64, **kw):
    d = {"kind": kind, "ports": kw.pop("ports", 8), "link_rate": R, **kw}
    return fabric_from_dict(d, world=world)


@pytest.mark.parametrize("kind", list(FABRIC_KINDS))
@pytest.mark.parametrize("world", [16, 64])
def test_every_port_of_every_accelerator_is_cabled_once(kind, world):
    f = make(kind, world=world, down_ports=8, up_ports=8 if kind == "all_ocs" else 2)
    used = {}
    for c in f.cables:
        for dev, port in ((c.a, c.a_port), (c.b, c.b_port)):
            assert (dev, port) not in used, "a port carries two cables"
            used[(dev, port)] = c
    for a in range(world):
        assert all((a, j) in used for j in range(f.ports))
    # every switching device uses exactly its declared ports
    for d in f.devices:
        assert sum(1 for (dev, _) in used if dev == d.id) == d.ports
    # each cable yields two opposite directed links with the fabric's rate
    assert len(f.links) == 2 * len(f.cables)
    for link in f.links[:50]:
        back = f.links[f.out_link[(link.dst, link.dst_port)]]
        assert (back.dst, back.dst_port) == (link.src, link.src_port)
        assert link.rate_Bps == R


def test_576_two_level_counts_follow_from_construction():
    """Figure 25: 648 level-1 chips, 72 (4:1) or 288 (non-blocking) level-2 chips of 72 ports."""
    counts = {k: make(k, world=512, accelerators=576, ports=36).component_counts() for k in ("all_eps", "hybrid", "all_ocs")}
    assert counts["all_eps"]["eps_chips"] == 648 + 72 and counts["all_eps"]["eps_ports"] == 720 * 72
    assert counts["hybrid"]["eps_chips"] == 648 and counts["hybrid"]["ocs_chips"] == 72
    assert counts["all_ocs"]["ocs_chips"] == 648 + 288 and counts["all_ocs"]["eps_chips"] == 0
    assert counts["all_eps"]["copper_cables"] == 20_736 and counts["all_eps"]["fiber_cables"] == 5_184
    assert counts["all_ocs"]["fiber_cables"] == 2 * 20_736
    f = make("hybrid", world=512, accelerators=576, ports=36)
    assert f.spec.racks == 18 and len(f.level1) == 18 and len(f.level2) == 36 and len(f.level2[0]) == 8
    assert {d.ports for d in f.devices if d.level == 1} == {40}  # 32 down + 8 up used of 72
    assert {d.ports for d in f.devices if d.level == 2} == {18}  # one port per rack
    assert f.chips[1].logical_per_chip == 4  # 288 logical switches on 72 chips


def test_level_kinds_and_media():
    f = make("hybrid", world=64, down_ports=16, up_ports=4)
    kinds = {d.level: d.kind for d in f.devices}
    assert kinds == {0: ACCELERATOR, 1: EPS, 2: OCS}
    lvl = {d.id: d.level for d in f.devices}
    for c in f.cables:
        assert c.medium == ("fiber" if {lvl[c.a], lvl[c.b]} == {1, 2} else "copper")
    g = make("single_ocs", world=16)
    assert all(c.medium == "fiber" for c in g.cables)


def test_forwarding_latency_from_table9():
    f = make("hybrid", world=64, down_ports=16, up_ports=4)
    eps = [d.forwarding_latency_s for d in f.devices if d.kind == EPS]
    ocs = [d.forwarding_latency_s for d in f.devices if d.kind == OCS]
    assert eps and ocs
    assert eps == pytest.approx([300e-9] * len(eps)) and ocs == pytest.approx([10e-9] * len(ocs))


def test_graph_view_is_a_multidigraph_of_all_links():
    f = make("all_eps", world=64, down_ports=16, up_ports=4, ports=4)
    g = f.graph()
    assert isinstance(g, nx.MultiDiGraph)
    assert g.number_of_nodes() == len(f.devices) and g.number_of_edges() == len(f.links)
    assert nx.is_strongly_connected(g)
    assert g.nodes[0]["kind"] == ACCELERATOR


def test_fabric_from_dict_accepts_parsed_suffix_keys_and_name_alias():
    spec = fabric_spec_from_dict({"name": "all_ocs", "ports": 36, "link_rate": "400Gb/s", "link_rate_Bps": R,
                                  "hop_latency": "0.5us", "ocs_pass_through_s": 2e-8, "accelerators": 576}, world=512)
    assert spec.kind == "all_ocs" and spec.up_ports == 32 and spec.link_rate_Bps == R
    assert spec.latency.ocs_pass_through_s == 2e-8
    single = fabric_spec_from_dict({"kind": "single_eps", "ports": 36, "link_rate": R}, world=512)
    assert single.accelerators == 512 and single.switch_radix is None and single.levels == 1


@pytest.mark.parametrize("d, world, fragment", [
    ({"kind": "mesh", "ports": 4, "link_rate": R}, 16, "unknown fabric"),
    ({"kind": "all_eps", "ports": 4, "link_rate": "400Gb/z"}, 64, "link_rate"),
    ({"kind": "all_eps", "ports": 4, "link_rate": R, "accelerators": 48}, 48, "multiple of down_ports"),
    ({"kind": "all_eps", "ports": 4, "link_rate": R, "up_ports": 41}, 64, "switch_radix"),
    ({"kind": "all_eps", "ports": 4, "link_rate": R, "accelerators": 576}, 600, "do not fit"),
    ({"kind": "single_eps", "ports": 4, "link_rate": R, "switch_radix": 72}, 512, "cannot reach"),
    ({"kind": "all_eps", "ports": 4, "link_rate": R, "colour": 1}, 64, "unknown fabric key"),
    ({"kind": "all_eps", "link_rate": R}, 64, "ports is not set"),
    ({"kind": "all_eps", "ports": 4}, 64, "link_rate is required"),
    ({"kind": "all_eps", "ports": 4, "link_rate": R, "platform": "fig1"}, 64, "other fabric family"),
    ({"kind": "all_eps", "ports": 4, "link_rate": R, "latency_case": "worst"}, 64, "Table 9"),
])
def test_bad_fabric_config_is_one_line_spec_error(d, world, fragment):
    with pytest.raises(SpecError, match=fragment) as err:
        fabric_from_dict(d, world=world)
    assert "\n" not in str(err.value)


def test_spec_is_frozen():
    spec = FabricSpec(kind="single_eps", accelerators=16, ports=4, link_rate_Bps=R, switch_radix=None)
    with pytest.raises(Exception):
        spec.ports = 5  # type: ignore[misc]
    assert build_fabric(spec).component_counts()["eps_chips"] == 4


def test_a_fabric_is_built_once_per_spec_and_its_links_when_first_read():
    """Network model and power build the fabric of the same frozen spec: one object, kept in a
    bounded cache that is safe to clear; the directed links follow the cables when read."""
    spec = fabric_spec_from_dict({"kind": "all_eps", "ports": 4, "link_rate": R, "down_ports": 8,
                                  "up_ports": 2}, world=32)
    twin = fabric_spec_from_dict({"kind": "all_eps", "ports": 4, "link_rate": R, "down_ports": 8,
                                  "up_ports": 2}, world=32)
    f = build_fabric(spec)
    assert twin == spec and twin is not spec and build_fabric(twin) is f
    for k in range(1, 8):  # other specs push it out: the cache stays bounded
        build_fabric(fabric_spec_from_dict({"kind": "all_eps", "ports": 4, "link_rate": R * k, "down_ports": 8,
                                            "up_ports": 2}, world=32))
    assert build_fabric.cache_info().currsize <= build_fabric.cache_info().maxsize and build_fabric(spec) is not f
    build_fabric.cache_clear()
    g = build_fabric(spec)
    assert g is not build_fabric(fabric_spec_from_dict({"kind": "all_eps", "ports": 2, "link_rate": R, "down_ports": 8,
                                                        "up_ports": 2}, world=32))
    assert len(g.links) == 2 * len(g.cables) and len(g.out_link) == len(g.links)
    for c_id, c in enumerate(g.cables[:20]):  # links 2c and 2c+1 are the two directions of cable c
        there, back = g.links[2 * c_id], g.links[2 * c_id + 1]
        assert (there.src, there.dst, back.src, back.dst) == (c.a, c.b, c.b, c.a)
        assert g.out_link[(c.a, c.a_port)] == 2 * c_id and g.out_link[(c.b, c.b_port)] == 2 * c_id + 1
