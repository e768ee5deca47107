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
