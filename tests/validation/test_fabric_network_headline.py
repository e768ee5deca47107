"""Section 6 headline (paper-numbers.md "Headline results to approach — within 15 %"), the
Figure 13 small-buffer points through the fabric network model, and decode power keys.

Megatron 5T and GPT-OSS-5.3-like, 512 of 576 RX00, 5M context, batch 1, FabricAnalytical on the
C.7 fabrics (36 ports × 400 Gb/s, radix 72, racks of 32, 4:1 on all-EPS/hybrid).

What holds (README.md):
* all-OCS within 15 % of the paper (698 and 1277 tokens/s/user);
* all-EPS is *not* within 15 %: the analytical model gives 581 / 1063 against 458 / 775. The paper
  reports its EPS points from Simlette (Section 5.4: "analytical model for design-space
  exploration and Simlette to evaluate the selected configurations"), and on EPS "the analytical
  model underestimates completion time by up to 2×" (contention at switch ports, credit stalls).
  The test asserts that relation: the paper's implied all-EPS communication time per step
  (1/interactivity minus our compute and launch time) lies between 1× and 2× ours;
* ordering all-OCS > all-EPS ≈ hybrid, and an all-OCS/all-EPS ratio above 1.15 but below the
  paper's (which carries the Simlette EPS penalty);
* the paper's all-EPS split (4,128,16,32) is our all-EPS optimum (slow test: full search).
"""

import json
import subprocess
import sys

import pytest

from fabrics.network.analytical import FabricAnalytical
from pipelines.network import fabric_from_dict
from fabrics.power import system_power_W
from gxnet.deployment import Deployment
from gxnet.executor import execute
from gxnet.parallel import ParallelSpec
from gxnet.plan import build_plan
from gxnet.testing import accelerator, model

PAPER = {  # tokens/s/user, Section 6.1
    ("megatron_5t", "all_eps"): ((4, 128, 16, 32), 458.0),
    ("megatron_5t", "all_ocs"): ((4, 128, 8, 64), 698.0),
    ("gpt_oss_5p3_like", "all_eps"): (None, 775.0),
    ("gpt_oss_5p3_like", "all_ocs"): (None, 1277.0),
}
# GPT-OSS-5.3-like: the paper does not give its splits; these are our searched optima
# (tests below: slow full search) — all-EPS (32,16,16,32), all-OCS (32,16,4,128).
OUR_SPLITS = {("gpt_oss_5p3_like", "all_eps"): (32, 16, 16, 32), ("gpt_oss_5p3_like", "all_ocs"): (32, 16, 4, 128)}
FABRIC = {"ports": 36, "link_rate": 5e10, "accelerators": 576}


def fabric(kind):
    return fabric_from_dict({"kind": kind, **FABRIC}, world=512)


def step(model_name, split, kind):
    kvp, tpa, ep, tpe = split
    d = Deployment(model=model(model_name), accelerator=accelerator("rx00"), world=512,
                   parallel=ParallelSpec(kvp=kvp, tpa=tpa, ep=ep, tpe=tpe), batch=1, context_tokens=5_000_000)
    return execute(build_plan(d), FabricAnalytical(fabric(kind)), trace=False)


def split_of(model_name, kind):
    return PAPER[(model_name, kind)][0] or OUR_SPLITS[(model_name, kind)]


@pytest.fixture(scope="module")
def steps():
    out = {}
    for (m, kind) in PAPER:
        out[(m, kind)] = step(m, split_of(m, kind), kind)
    out[("megatron_5t", "hybrid")] = step("megatron_5t", (4, 128, 16, 32), "hybrid")
    return out


@pytest.mark.parametrize("model_name", ["megatron_5t", "gpt_oss_5p3_like"])
def test_all_ocs_within_15_percent(steps, model_name):
    got = steps[(model_name, "all_ocs")].interactivity_tok_s_user
    assert got == pytest.approx(PAPER[(model_name, "all_ocs")][1], rel=0.15)


@pytest.mark.parametrize("model_name", ["megatron_5t", "gpt_oss_5p3_like"])
def test_all_eps_is_the_analytical_lower_bound_of_the_simulated_paper_point(steps, model_name):
    s = steps[(model_name, "all_eps")]
    ours_comm = s.breakdown_s["communication"]
    rest = s.decode_step_s - ours_comm
    paper_comm = 1.0 / PAPER[(model_name, "all_eps")][1] - rest
    assert s.interactivity_tok_s_user > PAPER[(model_name, "all_eps")][1]  # analytical is optimistic on EPS
    assert 1.0 < paper_comm / ours_comm <= 2.0  # Section 5.4 / C.4: up to 2× on EPS


@pytest.mark.parametrize("model_name", ["megatron_5t", "gpt_oss_5p3_like"])
def test_ocs_over_eps_ratio(steps, model_name):
    ocs = steps[(model_name, "all_ocs")].interactivity_tok_s_user
    eps = steps[(model_name, "all_eps")].interactivity_tok_s_user
    paper = PAPER[(model_name, "all_ocs")][1] / PAPER[(model_name, "all_eps")][1]
    assert 1.15 < ocs / eps < paper
    # compute and launches do not depend on the fabric: only communication differs
    so, se = steps[(model_name, "all_ocs")], steps[(model_name, "all_eps")]
    assert so.breakdown_s["fixed"] == se.breakdown_s["fixed"]


def test_hybrid_between(steps):
    """Hybrid runs the native EPS schedules over EPS level-1 paths: close to all-EPS (Appendix E:
    "the hybrid fabric gains almost nothing"), well below all-OCS."""
    h = steps[("megatron_5t", "hybrid")].interactivity_tok_s_user
    e = steps[("megatron_5t", "all_eps")].interactivity_tok_s_user  # same split (4,128,16,32)
    o = steps[("megatron_5t", "all_ocs")].interactivity_tok_s_user
    assert abs(h / e - 1) < 0.10
    assert o > 1.15 * max(h, e)


def test_energy_advantage_combines_speed_and_power(steps):
    """tokens/s/MW advantage = interactivity ratio × power ratio (1.33 at 400 G, Appendix E)."""
    pe, po = system_power_W(fabric("all_eps"), 2631.0), system_power_W(fabric("all_ocs"), 2631.0)
    assert pe / po == pytest.approx(1.33, rel=0.01)
    eps, ocs = steps[("megatron_5t", "all_eps")], steps[("megatron_5t", "all_ocs")]
    adv = (ocs.throughput_tok_s / po) / (eps.throughput_tok_s / pe)
    assert adv == pytest.approx(ocs.interactivity_tok_s_user / eps.interactivity_tok_s_user * pe / po, rel=1e-12)
    assert adv > 1.33


def run_search(tmp_path, model_name, kind):
    out = tmp_path / f"{model_name}_{kind}"
    proc = subprocess.run([sys.executable, "-m", "pipelines.search", f"model={model_name}", f"fabric={kind}",
                           "batch=1", "context=5M", "tracking.enabled=false", f"hydra.run.dir={out}"],
                          capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads((out / "results.json").read_text())


@pytest.mark.slow
def test_search_megatron_all_eps_finds_the_papers_split(tmp_path):
    res = run_search(tmp_path, "megatron_5t", "all_eps")
    assert tuple(res["best"]["parallel"].values()) == (4, 128, 16, 32)


@pytest.mark.slow
@pytest.mark.parametrize("model_name", ["megatron_5t", "gpt_oss_5p3_like"])
def test_search_all_ocs_within_15_percent_and_papers_split_near_best(tmp_path, model_name):
    res = run_search(tmp_path, model_name, "all_ocs")
    best = res["best"]["interactivity_tok_s_user"]
    assert best == pytest.approx(PAPER[(model_name, "all_ocs")][1], rel=0.15)
    if model_name == "megatron_5t":  # the paper's (4,128,8,64) is within 1 % of our optimum
        row = next(r for r in res["splits"] if tuple(r["parallel"].values()) == (4, 128, 8, 64))
        assert row["interactivity_tok_s_user"] >= 0.99 * best


@pytest.mark.slow
def test_simlette_all_eps_moves_towards_the_paper(tmp_path):
    """Section 5.4: the paper evaluates selected configurations with Simlette. Simlette (spray=source,
    unlimited buffers) on all-EPS is slower than the analytical model and closer to the paper's 458."""
    out = tmp_path / "sim"
    proc = subprocess.run([sys.executable, "-m", "pipelines.decode", "network=simlette", "fabric=all_eps",
                           "tracking.enabled=false", f"hydra.run.dir={out}"], capture_output=True, text=True,
                          timeout=1500)
    assert proc.returncode == 0, proc.stderr[-2000:]
    sim = json.loads((out / "results.json").read_text())["interactivity_tok_s_user"]
    ana = step("megatron_5t", (4, 128, 16, 32), "all_eps").interactivity_tok_s_user
    assert 458.0 < sim < ana
