"""The sweep driver's fast composition gives the config Hydra gives, on a few sweeps."""

import pytest

from hydra_plugins.gx_ray_launcher.compose import LeafComposer, same_config


def master_and_composer(config_name: str, overrides: list[str]):
    from hydra.core.utils import JobRuntime
    from hydra.types import RunMode

    from pipelines.app import config_loader

    from hydra.core.utils import setup_globals

    setup_globals()
    JobRuntime().set("name", config_name)
    loader = config_loader(None, None, overrides)
    master = loader.load_configuration(config_name, overrides, run_mode=RunMode.MULTIRUN)
    return LeafComposer(loader.load_sweep_config, master, loader.repository.group_exists)


SWEEPS = [
    ("decode", [], [["fabric=single_eps", "batch=4", "context=32K"], ["fabric=all_ocs", "batch=2", "context=5M"],
                    ["batch=8", "fabric=single_eps", "context=1M"]]),
    # leaves inside a group's node, and a float and a null
    ("decode", ["fabric=single_eps"], [["fabric.link_rate=800Gb/s", "fabric.hop_latency=1.2us", "batch=3"],
                                       ["fabric.hop_latency=0.5us", "world=256", "ep=null"]]),
    pytest.param("search", ["experiment=figure4_megatron"], [["fabric=all_ocs", "batch=1", "context=32K"],
                                                             ["fabric=hybrid", "batch=16", "context=5M"]],
                 marks=pytest.mark.slow),
]


@pytest.mark.parametrize("config_name,cli,points", SWEEPS)
def test_leaf_overrides_on_a_shared_base_compose_what_hydra_composes(config_name, cli, points):
    composer = master_and_composer(config_name, cli)
    for n, overrides in enumerate(points):
        fast = composer.compose(cli + overrides, n)
        assert fast.cfg is None, "a leaf-only point must not need Hydra"
        assert same_config(fast, composer._hydra_point(cli + overrides, n)), overrides
    # one Hydra composition per distinct set of group overrides (plus the references above)
    assert composer.hydra_compositions == len({tuple(o for o in p if "." not in o.split("=")[0] and
                                                     composer.is_group(o.split("=")[0])) for p in points}) + len(points)


def test_a_point_the_fast_path_cannot_take_falls_back_to_hydra():
    composer = master_and_composer("decode", [])
    # an addition is part of the base Hydra composes; the swept leaf is set on a copy of it
    added = composer.compose(["+gx_note=1", "batch=2"], 0)
    assert added.cfg is None and added.plain["gx_note"] == 1 and added.plain["batch"] == 2
    assert same_config(added, composer._hydra_point(["+gx_note=1", "batch=2"], 0))
    # an interpolation that reads another node may read a swept one: Hydra composes each point
    ref = composer.compose(["+gx_ref=${batch}", "batch=3"], 1)
    assert ref.cfg is not None and ref.plain["gx_ref"] == 3
    with pytest.raises(Exception, match="no_such_key"):
        composer.compose(["no_such_key=1"], 2)  # Hydra's own error for a key that is not there
    with pytest.raises(Exception, match="no_such_key"):
        composer.check(["no_such_key=1"])


def test_points_are_checked_and_hashed_as_a_whole_config_would_be():
    from hydra_plugins.gx_ray_launcher.gx_ray_launcher import SharedNodes
    from pipelines.sweep import point_config
    from pipelines.tracking import config_hash

    cli = ["fabric=single_eps"]
    composer = master_and_composer("decode", cli)
    shared = SharedNodes()
    for n, leaves in enumerate([["batch=2"], ["batch=3", "fabric.hop_latency=1us"], ["context=1M"]]):
        c = composer.compose(cli + leaves, n)
        part = shared.changed(c)
        assert part is c.plain if n == 0 else set(part) <= set(c.plain)  # the first point of a base: all of it
        if "fabric" in part:
            assert "network" in part  # checked together
        plain = point_config(c.plain)
        assert shared.config_hash("decode", plain, c.base) == config_hash("decode", plain)
