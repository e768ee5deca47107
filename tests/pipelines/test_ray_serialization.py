"""Ray's optional serialization add-ons (pyarrow, pydantic, starlette) are left out of a sweep's
driver and workers (pipelines.ray_cluster.lean_serialization): nothing the sweep sends needs them."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ADDONS = ("pyarrow", "pydantic", "starlette")


def _run(code: str, timeout_s: float = 120) -> dict:
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=timeout_s)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


APPLY = """
import json, sys
import ray
from ray.util import serialization_addons
from pipelines import ray_cluster
{setup}
class Context:  # what apply() registers into; every registration accepted
    def __getattr__(self, name):
        return lambda *args, **kwargs: None
serialization_addons.apply(Context())
print(json.dumps({{"imported": [m for m in {addons!r} if m in sys.modules]}}))
"""


def test_apply_imports_the_add_ons_unless_left_out():
    assert _run(APPLY.format(setup="", addons=ADDONS))["imported"] == list(ADDONS)  # the premise: MLflow installs them
    assert _run(APPLY.format(setup="ray_cluster.lean_serialization()", addons=ADDONS))["imported"] == []


def test_outside_a_ray_worker_the_worker_hook_changes_nothing():
    setup = "import pipelines.sweep; ray_cluster.lean_serialization_in_worker()"
    assert _run(APPLY.format(setup=setup, addons=ADDONS))["imported"] == list(ADDONS)


WORKER = """
import json, sys
import ray
import pipelines.sweep as sweep
from pipelines.ray_cluster import lean_head
with lean_head(log_to_driver=False):
    ray.init(num_cpus=1, include_dashboard=False, logging_level="ERROR")
ray.get(ray.remote(sweep._worker_name).remote())  # the worker imports pipelines.sweep to load it

@ray.remote
def imported():
    import sys
    return [m for m in {addons!r} if m in sys.modules]

print(json.dumps({{"worker": ray.get(imported.remote())}}))
"""


def test_a_worker_that_loads_the_sweeps_task_builds_its_context_without_them():
    assert _run(WORKER.format(addons=ADDONS))["worker"] == []
