"""The private Ray of a sweep starts on a thread while the points are composed (pipelines.ray_cluster)."""

from __future__ import annotations

import pytest

from pipelines import ray_cluster


@pytest.fixture
def no_early(monkeypatch):
    monkeypatch.setattr(ray_cluster, "_EARLY", [])
    started = []
    monkeypatch.setattr(ray_cluster, "EarlyStart", lambda cfg: started.append(cfg) or FakeStart(cfg))
    return started


class FakeStart:
    def __init__(self, cfg):
        self.key, self.waited = ray_cluster._early_key(cfg), False

    def wait(self):
        self.waited = True


@pytest.mark.parametrize("cfg", [{"enabled": False}, {"address": "auto"}, {"address": "10.0.0.1:6379"},
                                 {"address": "ray://x:10001"}])
def test_no_early_start_without_a_private_ray(no_early, cfg):
    ray_cluster.start_early(cfg)
    assert no_early == [] and ray_cluster._EARLY == []


def test_early_start_once_and_connect_waits_for_it(no_early, monkeypatch):
    ray_cluster.start_early({"num_cpus": 2})
    ray_cluster.start_early({"num_cpus": 2})
    assert len(no_early) == 1
    early = ray_cluster._EARLY[0]

    class Ray:
        @staticmethod
        def is_initialized():
            return early.waited  # Ray is up once the early start has been waited for

        @staticmethod
        def cluster_resources():
            return {"CPU": 2.0}

    monkeypatch.setitem(__import__("sys").modules, "ray", Ray)
    monkeypatch.setattr(ray_cluster, "_start_private", lambda cfg: pytest.fail("a second private Ray"))
    target, cpus = ray_cluster.connect({"num_cpus": 2})
    assert early.waited and cpus == 2 and not target.joins and ray_cluster._EARLY == []


def test_early_start_error_is_raised_by_connect(monkeypatch):
    monkeypatch.setattr(ray_cluster, "_EARLY", [])

    def fail(cfg):
        raise RuntimeError("no Ray here")

    monkeypatch.setattr(ray_cluster, "_start_private", fail)
    ray_cluster.start_early({"num_cpus": 1})
    with pytest.raises(RuntimeError, match="no Ray here"):
        ray_cluster.connect({"num_cpus": 1})


@pytest.mark.parametrize("log_to_driver", [False, True])
def test_lean_head_leaves_out_the_monitors_and_the_api_server(monkeypatch, log_to_driver):
    from ray._private import node as ray_node
    from ray._private.parameter import RayParams

    made = []
    monkeypatch.setattr(ray_node.Node, "__init__", lambda self, ray_params, **kw: made.append((ray_params, kw)))
    monkeypatch.setattr(ray_node.Node, "start_api_server", lambda self, **kw: pytest.fail("API server started"))
    before = ray_node.Node.__init__, ray_node.Node.start_api_server
    with ray_cluster.lean_head(log_to_driver=log_to_driver):
        head, worker = RayParams(), RayParams()
        node = object.__new__(ray_node.Node)
        ray_node.Node.__init__(node, ray_params=head, head=True)
        ray_node.Node.__init__(node, ray_params=worker)  # a non-head node is left as it is
        assert node.start_api_server(include_dashboard=False, raise_on_failure=False) is None
    assert [p for p, _ in made] == [head, worker]
    assert head.no_monitor and head.include_log_monitor is (None if log_to_driver else False)
    assert not worker.no_monitor and worker.include_log_monitor is None
    assert (ray_node.Node.__init__, ray_node.Node.start_api_server) == before  # restored
