"""How a -m sweep is cut into Ray tasks: colocated units, adaptive batch sizes, composing each
point once, and the cheap pre-check of swept plain values (pipelines/sweep.py, app.py, launcher)."""

from pathlib import Path

from pipelines.app import _sweep_variants
from pipelines.sweep import BatchSizer, SweepPoint, _InFlight, _units, colocated_units, stream_points


def point(i, **cfg):
    return SweepPoint(index=i, overrides=[], cfg=cfg, out_dir=Path(f"/tmp/{i}"))


def test_points_differing_only_in_colocated_keys_form_one_unit_in_sweep_order():
    pts = [point(i, fabric=f, batch=b, context=c, parallel={"kvp": 4})
           for i, (f, b, c) in enumerate((f, b, c) for f in ("all_ocs", "all_eps") for b in (1, 2)
                                         for c in ("32K", "5M"))]
    units = colocated_units(pts, ["context"])
    assert [[p.index for p in u] for u in units] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    # every point in a unit agrees on everything but context
    for u in units:
        assert len({(p.cfg["fabric"], p.cfg["batch"]) for p in u}) == 1
    # nested keys and several keys
    units = colocated_units(pts, ["context", "batch"])
    assert [[p.index for p in u] for u in units] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    nested = [point(0, parallel={"kvp": 4, "tpa": 8}), point(1, parallel={"kvp": 2, "tpa": 8}),
              point(2, parallel={"kvp": 4, "tpa": 16})]
    assert [[p.index for p in u] for u in colocated_units(nested, ["parallel.kvp"])] == [[0, 1], [2]]
    # no keys: one unit per point; a key no point has changes nothing
    assert [len(u) for u in colocated_units(pts, [])] == [1] * 8
    assert [len(u) for u in colocated_units(pts, ["nope"])] == [1] * 8


def _figure4_like():
    cells = [(f, b, c) for f in ("all_ocs", "hybrid", "all_eps") for b in (1, 2, 4, 8, 16) for c in ("32K", "5M")]
    return [point(i, fabric=f, batch=b, context=c) for i, (f, b, c) in enumerate(cells)]


def test_affinity_merges_a_fabrics_batches_on_few_workers_and_keeps_them_apart_on_many():
    pts = _figure4_like()
    todo = list(range(len(pts)))
    without = list(_units(pts, todo, ["context"]))
    assert len(without) == 15 and without[0] == [0, 1]
    # 2 workers, 3 fabrics: one process per fabric, in sweep order, every point once
    two = list(_units(pts, todo, ["context"], ["batch"], n_workers=2))
    assert two == [list(range(0, 10)), list(range(10, 20)), list(range(20, 30))]
    # 4 workers: each fabric in two runs of consecutive batches (still >= one task per worker)
    four = list(_units(pts, todo, ["context"], ["batch"], n_workers=4))
    assert [len(u) for u in four] == [6, 4] * 3 and sorted(i for u in four for i in u) == todo
    assert all({pts[i].cfg["fabric"] for i in u} == {pts[u[0]].cfg["fabric"]} for u in four)
    # as many workers as units: the colocated units as they were
    assert list(_units(pts, todo, ["context"], ["batch"], n_workers=16)) == without
    # a subset (a rerun's remaining points) is merged the same way
    assert list(_units(pts, [3, 4, 5, 12], ["context"], ["batch"], n_workers=2)) == [[3, 4, 5], [12]]


class _Lazy:
    """Like the launcher's PointSource: every lookup composes a new point object."""

    def __init__(self, pts):
        self.pts = pts

    def __len__(self):
        return len(self.pts)

    def __getitem__(self, i):
        p = self.pts[i]
        return SweepPoint(index=p.index, overrides=[], cfg=dict(p.cfg), out_dir=p.out_dir)


def test_affinity_on_a_lazy_point_source_gives_the_same_units():
    pts = _figure4_like()
    todo = list(range(len(pts)))
    assert list(_units(_Lazy(pts), todo, ["context"], ["batch"], n_workers=2)) == \
        list(_units(pts, todo, ["context"], ["batch"], n_workers=2))


def test_batch_sizer_adapts_to_observed_point_time():
    fixed = BatchSizer(5, n_workers=2)
    assert fixed.size(100) == 5
    auto = BatchSizer("auto", n_workers=2, target_task_s=0.5)
    assert auto.size(1000) == 1  # nothing observed yet: one unit per task
    auto.observe([{"wall_s": 0.001}] * 4)  # millisecond points: about 0.5 s of work per task, at most 64
    assert auto.size(1000) == 64
    assert auto.size(40) == 10  # but never more than a 1/(2 x workers) share of what is left
    slow = BatchSizer("auto", n_workers=2)
    slow.observe([{"wall_s": 12.0}, {"wall_s": 3.0}])
    assert slow.size(1000) == 1  # second-scale points: one per task keeps the load balanced


def test_a_task_streams_its_points_in_chunks_of_about_the_chunk_time(tmp_path, monkeypatch):
    (tmp_path / "gx_napping").mkdir()
    (tmp_path / "gx_napping" / "__init__.py").write_text("")
    (tmp_path / "gx_napping" / "pipeline.py").write_text(
        "import time\n\n\nclass main:\n    @staticmethod\n    def task(cfg):\n"
        "        time.sleep(cfg['s'])\n        return {'s': cfg['s']}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    cfgs = [{"s": s} for s in (0.0, 0.0, 0.3, 0.0, 0.3)]
    chunks = list(stream_points("gx_napping.pipeline", cfgs, chunk_s=0.25))
    # a chunk closes with the first point that ends 0.25 s after the chunk before; the rest at the end
    assert [[o["results"]["s"] for o in c] for c in chunks] == [[0.0, 0.0, 0.3], [0.0, 0.3]]
    assert [len(c) for c in stream_points("gx_napping.pipeline", cfgs, chunk_s=0.0)] == [1] * 5
    assert [len(c) for c in stream_points("gx_napping.pipeline", cfgs, chunk_s=60.0)] == [5]
    assert all(o["ok"] and "worker" in o for c in chunks for o in c)


def test_a_task_in_flight_hands_out_its_points_in_order_once():
    flight = _InFlight(group=["a", "b", "c", "d"], positions=[7, 8, 9, 10], hard=None)
    assert flight.take(1) == ([7], ["a"])
    assert flight.take(2) == ([8, 9], ["b", "c"])
    assert flight.rest() == ([10], ["d"]) and flight.rest() == ([], [])


def test_swept_plain_values_are_set_not_recomposed_but_groups_are_composed():
    variants, scalars = _sweep_variants(["batch=1,2,4", "fabric=all_eps,all_ocs", "context=5M", "+foo=1,2"])
    assert variants[0] == ["batch=1", "fabric=all_eps", "context=5M", "+foo=1"]
    assert ["batch=1", "fabric=all_ocs", "context=5M", "+foo=1"] in variants
    assert ["batch=1", "fabric=all_eps", "context=5M", "+foo=2"] in variants  # '+' changes the structure
    assert len(variants) == 3
    assert scalars == [("batch", 2), ("batch", 4)]


def test_the_sweepers_check_composes_each_distinct_base_once():
    from omegaconf import OmegaConf

    from hydra_plugins.gx_ray_launcher.gx_ray_launcher import _compose_once

    class Repository:
        @staticmethod
        def group_exists(key):
            return key == "fabric"

    class Loader:
        repository = Repository()

        def __init__(self):
            self.calls = []

        def load_sweep_config(self, master_config, sweep_overrides):
            self.calls.append(tuple(sweep_overrides))
            return OmegaConf.create({"batch": 1, "fabric": {"name": "x"}, "hydra": {"job": {}}})

    loader = Loader()
    master = OmegaConf.create({"hydra": {"job": {"config": {"override_dirname": {
        "exclude_keys": [], "item_sep": ",", "kv_sep": "="}}}}})
    _compose_once(loader)
    _compose_once(loader)  # idempotent
    for fabric in ("a", "b"):
        for batch in (1, 2, 4):  # the sweeper's validation of each point
            assert loader.load_sweep_config(master, [f"fabric={fabric}", f"batch={batch}"]) is None
    assert loader.calls == [("fabric=a",), ("fabric=b",)]  # one composition per distinct base


def test_a_bad_ray_batch_size_is_one_line_exit_2_before_anything_is_written(tmp_path):
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    for bad in ("abc", "0", "2.5"):
        proc = subprocess.run([sys.executable, "-m", "pipelines.demand", "-m", "batch=1,2", f"ray.batch_size={bad}",
                               f"hydra.sweep.dir={tmp_path / 'm'}"], cwd=root, capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 2, proc.stderr[-2000:]
        assert proc.stderr.strip().count("\n") == 0 and "ray.batch_size" in proc.stderr
        assert not (tmp_path / "m").exists()


def test_precheck_still_rejects_a_bad_swept_plain_value(tmp_path):
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-m", "pipelines.decode", "-m", "parallel.kvp=4,8.5",
                           f"hydra.sweep.dir={tmp_path / 'm'}"], cwd=root, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.count("\n") <= 2 and "8.5" in proc.stderr and "kvp" in proc.stderr
    assert not (tmp_path / "m").exists()


class _Stream:
    def __init__(self, tty: bool):
        self.tty, self.text, self.encoding = tty, "", "utf-8"

    def isatty(self):
        return self.tty

    def write(self, s):
        self.text += s

    def flush(self):
        pass


def test_progress_is_a_plain_rate_limited_line_off_a_terminal_and_redrawn_on_one():
    from pipelines.sweep import Progress, SweepSummary

    log = _Stream(tty=False)
    p = Progress(total=9, todo=9, stream=log, every_s=3600)
    s = SweepSummary()
    p.update(s)
    s.done = 3
    p.update(s)  # within the rate limit: not shown
    s.done, s.failed, s.skipped = 8, 1, 0
    p.update(s, final=True)  # the last one always is
    lines = log.text.splitlines()
    assert "\r" not in log.text and len(lines) == 2
    assert lines[0] == "done 0 · failed 0 · skipped 0 · ETA ?"
    assert lines[1] == "done 8 · failed 1 · skipped 0 · ETA 0 s"
    tty = _Stream(tty=True)
    p = Progress(total=4, todo=2, stream=tty)
    s = SweepSummary(skipped=2)
    p.update(s)
    s.done = 1
    p.shown_at = None
    p.update(s)
    assert tty.text.count("\r\x1b[K") == 2 and "3/4 done 1 · failed 0 · skipped 2 · ETA" in tty.text
    assert not tty.text.endswith("\n")
    p.update(s, final=True)
    assert tty.text.endswith("\n")


def test_progress_eta_counts_only_points_that_run():
    from pipelines.sweep import Progress, SweepSummary

    p = Progress(total=10, todo=4, stream=_Stream(False))
    p.t0 -= 10.0  # 10 s in, 2 of the 4 points to run are done
    assert p.line(SweepSummary(done=2, skipped=6)).endswith("ETA 10 s")


def test_result_table_has_the_swept_keys_main_metrics_and_status():
    from pipelines.sweep import result_table

    pts = [SweepPoint(index=i, overrides=[f"fabric={f}", f"batch={b}", "tracking=off"], cfg={}, out_dir=Path("/tmp"))
           for i, (f, b) in enumerate([("all_eps", 1), ("all_ocs", 1), ("all_eps", 4)])]
    rows = [(pts[0], "FINISHED", {"interactivity_tok_s_user": 580.71, "throughput_tok_s": 580.7, "other": 1.0}),
            (pts[1], "SKIPPED (finished before)", {"interactivity_tok_s_user": 729.7}),
            (pts[2], "FAILED", {})]
    lines = result_table("decode", rows).splitlines()
    assert lines[0] == "| fabric | batch | interactivity_tok_s_user | throughput_tok_s | status |"
    assert lines[2] == "| all_eps | 1 | 580.7 | 580.7 | FINISHED |"
    assert lines[4] == "| all_eps | 4 |  |  | FAILED |"
    # a pipeline without a list of main metrics shows its first numbers
    assert "| a | b |" in result_table("splits", [(pts[0], "FINISHED", {"a": 1.0, "b": 2})]).splitlines()[0]


def test_ray_address_modes_and_their_errors():
    import pytest

    from collectives.errors import SpecError
    from pipelines.ray_cluster import Target, join_error, target_of

    assert target_of(None) == target_of("local") == Target(mode="local") and not target_of(None).joins
    assert target_of("auto").mode == "auto" and target_of("auto").joins
    assert target_of("10.0.0.1:6379") == Target(mode="join", address="10.0.0.1:6379")
    for bad in ("somewhere", "host:0", "host:99999", "ray://host:10001", ":6379"):
        with pytest.raises(SpecError, match="ray.address"):
            target_of(bad)
    msg = join_error(Target(mode="join", address="h:1"), ConnectionError("Failed to connect"),
                     "gcs_client.cc:210: Unauthenticated: RPC error: InvalidAuthToken: missing")
    assert "token authentication" in msg and "RAY_AUTH_TOKEN" in msg and "\n" not in msg
    assert "no Ray cluster to join" in join_error(Target(mode="auto"), ConnectionError(
        "Could not find any running Ray instance. Please specify"), "")


def test_a_closed_head_port_is_lost_after_the_grace_time():
    import socket

    from pipelines.ray_cluster import HeadWatch

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        watch = HeadWatch(f"127.0.0.1:{port}", every_s=0.0, grace_s=0.0)
        assert watch.lost() is None
    lost = watch.lost()
    assert lost and f"127.0.0.1:{port} lost" in lost
    assert HeadWatch(None).lost() is None


def test_point_timeout_values():
    import pytest

    from collectives.errors import SpecError
    from pipelines.sweep import point_timeout_s

    assert point_timeout_s({"point_timeout": "90s"}) == 90.0 and point_timeout_s({"point_timeout": None}) is None
    assert point_timeout_s({}) is None and point_timeout_s({"point_timeout": 2}) == 2.0
    for bad in ("0s", "inf", "nan", "-1s", "soon"):
        with pytest.raises(SpecError, match="sweep.point_timeout"):
            point_timeout_s({"point_timeout": bad})


def test_a_failed_run_exits_1_and_a_signal_128_plus_it():
    from pipelines.sweep import SweepSummary

    assert SweepSummary(done=3, skipped=2).exit_code == 0
    assert SweepSummary(done=3, failed=1).exit_code == 1
    assert SweepSummary(done=3, head_lost="Ray head at h:1 lost").exit_code == 1
    assert SweepSummary(done=1, cancelled=1, signal=15).exit_code == 143
