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


def test_lean_head_waits_for_the_raylet_by_polling_then_asks_ray(monkeypatch):
    from ray._private import services as ray_services

    calls = []
    monkeypatch.setattr(ray_services, "get_node", lambda gcs, node: calls.append(("ray", gcs, node)) or {"n": node})
    monkeypatch.setattr(ray_cluster, "wait_until_registered", lambda gcs, node: calls.append(("poll", gcs, node)))
    original = ray_services.get_node
    with ray_cluster.lean_head(log_to_driver=False):
        assert ray_services.get_node is not original
        assert ray_services.get_node("127.0.0.1:6379", "ab12") == {"n": "ab12"}
    assert calls == [("poll", "127.0.0.1:6379", "ab12"), ("ray", "127.0.0.1:6379", "ab12")]
    assert ray_services.get_node is original  # restored


class FakeState:
    """GlobalState's surface wait_until_registered uses: the node table answers ``tables`` in turn."""

    def __init__(self, tables):
        self.tables, self.asked, self.disconnected = list(tables), 0, False

    def _initialize_global_state(self, options):
        self.options = options

    def node_table(self):
        self.asked += 1
        table = self.tables.pop(0) if len(self.tables) > 1 else self.tables[0]
        if isinstance(table, Exception):
            raise table
        return table

    def disconnect(self):
        self.disconnected = True


def _fake_state(monkeypatch, tables) -> FakeState:
    import ray

    state = FakeState(tables)
    monkeypatch.setattr(ray._private.state, "GlobalState", lambda: state)
    return state


def test_wait_until_registered_returns_once_the_node_is_alive(monkeypatch):
    me = {"NodeID": "ab12", "Alive": True}
    state = _fake_state(monkeypatch, [[], [{"NodeID": "ab12", "Alive": False}], RuntimeError("GCS busy"), [me]])
    assert ray_cluster.wait_until_registered("127.0.0.1:6379", "ab12", timeout_s=5, poll_s=0.001)
    assert state.asked == 4 and state.disconnected  # not listed, listed dead, an error: asked again


def test_wait_until_registered_gives_up_at_its_timeout(monkeypatch):
    import time

    state = _fake_state(monkeypatch, [[{"NodeID": "other", "Alive": True}]])
    t0 = time.monotonic()
    assert not ray_cluster.wait_until_registered("127.0.0.1:6379", "ab12", timeout_s=0.05, poll_s=0.01)
    assert 0.05 <= time.monotonic() - t0 < 2 and state.asked >= 2 and state.disconnected


SWEEP = {"hydra": {"launcher": {"_target_": "hydra_plugins.gx_ray_launcher.gx_ray_launcher.GxRayLauncher"}},
         "ray": {"enabled": True, "address": "local", "num_cpus": None, "log_to_driver": False}}


@pytest.fixture
def early_calls(monkeypatch):
    calls = []
    monkeypatch.setattr(ray_cluster, "start_early", lambda cfg: calls.append(cfg))
    return calls


def test_a_gx_sweep_starts_its_ray_from_the_precheck(early_calls):
    from pipelines.app import start_sweep_ray_early

    start_sweep_ray_early(SWEEP, ["experiment=figure4_megatron", "batch=1,2"])
    assert early_calls == [SWEEP["ray"]]


@pytest.mark.parametrize("override", ["ray.num_cpus=1,2", "ray=local", "+ray.extra=1", "~ray.colocate",
                                      "ray@_global_=local"])
def test_not_when_an_override_touches_ray(early_calls, override):
    from pipelines.app import start_sweep_ray_early

    start_sweep_ray_early(SWEEP, ["experiment=figure4_megatron", override])
    assert early_calls == []


@pytest.mark.parametrize("composed", [
    {**SWEEP, "hydra": {"launcher": {"_target_": "hydra._internal.core_plugins.basic_launcher.BasicLauncher"}}},
    {**SWEEP, "ray": {**SWEEP["ray"], "num_cpus": "${oc.env:CPUS}"}},
    {"hydra": SWEEP["hydra"]}])
def test_not_for_another_launcher_or_a_ray_node_only_the_launcher_resolves(early_calls, composed):
    from pipelines.app import start_sweep_ray_early

    start_sweep_ray_early(composed, ["rayleigh=1"])  # a key that merely starts with "ray" does not count
    assert early_calls == []


@pytest.mark.parametrize("argv, started", [(["-m", "fabric=all_eps,all_ocs", "batch=1"], True),
                                           (["fabric=all_eps", "batch=1"], False),
                                           (["-m", "fabric=all_eps,all_ocs", "ray.enabled=false"], False)])
def test_precheck_starts_ray_only_for_a_multirun(early_calls, argv, started):
    from pipelines.app import precheck_overrides

    precheck_overrides("search", argv)
    assert len(early_calls) == int(started)
    if started:
        assert early_calls[0]["address"] == "local"
