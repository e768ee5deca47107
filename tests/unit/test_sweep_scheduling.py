"""How a -m sweep is cut into Ray tasks: colocated units, adaptive batch sizes, composing each
point once, and the cheap pre-check of swept plain values (pipelines/sweep.py, app.py, launcher)."""

from pathlib import Path

from pipelines.app import _sweep_variants
from pipelines.sweep import BatchSizer, SweepPoint, colocated_units


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


def test_swept_plain_values_are_set_not_recomposed_but_groups_are_composed():
    variants, scalars = _sweep_variants(["batch=1,2,4", "fabric=all_eps,all_ocs", "context=5M", "+foo=1,2"])
    assert variants[0] == ["batch=1", "fabric=all_eps", "context=5M", "+foo=1"]
    assert ["batch=1", "fabric=all_ocs", "context=5M", "+foo=1"] in variants
    assert ["batch=1", "fabric=all_eps", "context=5M", "+foo=2"] in variants  # '+' changes the structure
    assert len(variants) == 3
    assert scalars == [("batch", 2), ("batch", 4)]


def test_launcher_composes_each_point_once():
    from hydra_plugins.gx_ray_launcher.gx_ray_launcher import _compose_once

    class Loader:
        def __init__(self):
            self.calls = 0

        def load_sweep_config(self, master_config, sweep_overrides):
            self.calls += 1
            return {"overrides": tuple(sweep_overrides), "n": self.calls}

    loader, master = Loader(), object()
    _compose_once(loader)
    _compose_once(loader)  # idempotent
    first = loader.load_sweep_config(master, ["batch=1"])  # the sweeper's validation
    assert loader.calls == 1
    assert loader.load_sweep_config(master, ["batch=1"], _take=True) is first  # the launcher's: no second compose
    assert loader.calls == 1
    again = loader.load_sweep_config(master, ["batch=1"], _take=True)  # given back once only
    assert loader.calls == 2 and again is not first


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
