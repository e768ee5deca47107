"""gx decode on a GPU fabric writes power to results.json (pipelines/power.py, docs/power.md).

Runs once fabric=nvswitch is configured (conf/fabric/nvswitch.yaml); skipped before.
"""

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(not (ROOT / "conf/fabric/nvswitch.yaml").exists(), reason="fabric=nvswitch not configured yet")
def test_decode_on_an_hgx_node_writes_power(pipeline):
    proc, out = pipeline("decode", "model=llama3_1_8b", "accelerator=h100", "fabric=nvswitch", "fabric.world=8",
                         "world=8", "parallel=tp_ep", "parallel.tp=8", "parallel.ep=1", "batch=8", "context=8192",
                         "tracking=off")
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads((out / "results.json").read_text())
    assert res["system_power_W"] == pytest.approx(res["power_breakdown_W"]["total_W"])
    assert res["power_breakdown_W"]["gpus"] == 8 and res["system_power_W"] < 20_000
    assert res["tokens_per_s_per_MW"] == pytest.approx(res["throughput_tok_s"] / res["system_power_W"] * 1e6)
