"""network=nccl against its calibration set (conf/measurements/nccl_allreduce.yaml = sections 1-2 of
../shared/reference/gpu-measurements.md): (a) the committed parameters are what the fit produces,
(b) the acceptance bounds, priced through the registered model on ClusterSpec(NvSwitchDomain)."""

from __future__ import annotations

from dataclasses import replace
from collections import Counter
from functools import lru_cache

import pytest
import yaml

from fabrics.network.protocol import CollectiveCall, DemandEntry
from fabrics.network.registry import build_network_model
from fabrics.nvswitch import NvSwitchDomain
from fabrics.spec import ClusterSpec
from pipelines import fit_nccl
from pipelines.nccl_params import PARAMS_FILE, default_mapping, nccl_spec

KiB, MiB, GiB = 2**10, 2**20, 2**30
ROWS = fit_nccl.load_rows()
SPEC = nccl_spec(default_mapping())  # the committed parameters, as a user's run loads them


@lru_cache(maxsize=None)
def spec_at(version: str):
    """The committed parameters at one NCCL release (``network.nccl_version=...``, as a user sets it)."""
    return nccl_spec({**default_mapping(), "nccl_version": version})


@lru_cache(maxsize=None)
def model(accelerator: str, gpus: int, nvls: bool, algorithm: str, version: str):
    acc = yaml.safe_load((fit_nccl.ACCELERATORS / f"{accelerator}.yaml").read_text())
    node = NvSwitchDomain(name=accelerator, gpus=gpus, max_gpus=acc["nvlink_domain_max"], nvlink_ports=acc["nvlink_ports"],
                          nvlink_rate_Bps=acc["nvlink_rate_Bps"], nvls=nvls)
    cluster = ClusterSpec(name="nvswitch", nodes=1, node=node)
    return build_network_model("nccl", cluster, replace(spec_at(version), algorithm=algorithm), gpus)


def run(row: fit_nccl.Row, *, algorithm: str | None = None):
    """(time_s, schedule) of one row through the NetworkModel protocol, at the row's NCCL release."""
    m = model(row.accelerator, row.gpus, row.nvls, algorithm or row.algorithm, row.nccl_version)
    demand = (DemandEntry(region="r", axis="tp", collective=row.collective, groups=1, ranks=row.gpus, calls_per_step=1,
                          payload_bytes=row.size_bytes),)
    m.prepare(demand, row.gpus)
    m.register(CollectiveCall(call_id=0, region="r", axis="tp", collective=row.collective,
                              groups=(tuple(range(row.gpus)),), payload_bytes=row.size_bytes), 0.0)
    (done,) = m.advance()
    assert done.parts["latency_s"] + done.parts["bandwidth_s"] == pytest.approx(done.end_s)
    return done.end_s, done.schedule


def timed(table: str, *, low: int = 0, high: int = 2**62):
    return [r for r in ROWS if r.table == table and r.time_s is not None and low <= r.size_bytes <= high]


def errors(rows):
    return {(r.table, r.gpus, r.size_bytes): run(r)[0] / r.time_s - 1 for r in rows}


def _number(text) -> float:
    return float(str(text).removesuffix("us"))


def test_fit_reproduces_committed_parameters():
    """Re-run the fit: every committed '# fitted' / '# tied' value is what it writes (to the 4 digits
    written; a last-digit tolerance for floating-point differences between machines)."""
    committed = yaml.safe_load(PARAMS_FILE.read_text())["generations"]
    written = fit_nccl.written_values(fit_nccl.fit_all())
    assert len(written) == 18 + 18  # each: 17 shared + hopper cuda_graph_saving, blackwell nvls_rank_latency
    for key, text in written.items():
        node = committed
        for part in key:
            node = node[part]
        assert _number(node) == pytest.approx(_number(text), rel=1e-3, abs=1e-4), key
    # and writing them changes nothing else in the file
    text = PARAMS_FILE.read_text()
    assert yaml.safe_load(fit_nccl.rewrite_yaml(text, written)).keys() == yaml.safe_load(text).keys()


def test_h200_default_choice_within_20_percent_from_32k_to_16g():
    rows = timed("h200_default", low=32 * KiB)
    assert len(rows) == 20
    bad = {k: e for k, e in errors(rows).items() if abs(e) > 0.20}
    assert not bad


@pytest.mark.parametrize("table", ["h100_nvls_forced", "h200_nvls_forced"])
def test_nvls_forced_within_20_percent_from_32k(table):
    """H100 (NCCL 2.18.5) and H200 (2.20.5) on the same NVLink4 / NVSwitch hardware, each at its own
    release: one hardware parameter set, the releases' NVLS channel partitions (docs/nccl.md)."""
    rows = timed(table, low=32 * KiB)
    assert len(rows) == 19
    errs = errors(rows)
    assert all(run(r)[1] == "nvls/simple" for r in rows)
    assert not {k: e for k, e in errs.items() if abs(e) > 0.20}


def test_nvls_partition_explains_the_h100_plateau():
    """At 64 KiB NCCL 2.18.5 puts the whole message on one NVLS channel and 2.20.5 spreads it over 16:
    the same hardware parameters price 2.18.5 slower there and equal at 8 GiB."""
    row = next(r for r in timed("h100_nvls_forced") if r.size_bytes == 64 * KiB)
    t_old = run(row)[0]
    t_new = run(replace(row, nccl_version="2.20.5"))[0]
    assert t_old > 1.05 * t_new
    big = next(r for r in timed("h100_nvls_forced") if r.size_bytes == 8 * GiB)
    assert run(big)[0] == pytest.approx(run(replace(big, nccl_version="2.20.5"))[0], rel=1e-3)


def test_busbw_8_to_16_gib_within_10_percent():
    rows = [r for r in ROWS if r.time_s is not None and r.accelerator in ("h100", "h200") and r.gpus == 8
            and 8 * GiB <= r.size_bytes <= 16 * GiB and not r.table.startswith("h200_8g_by_gpus")]
    assert len(rows) == 8  # default 8G, 16G; 16G NVLS / NVLS off / all-gather / reduce-scatter; forced 8G x 2
    bad = {k: e for k, e in errors(rows).items() if abs(e) > 0.10}
    assert not bad


def test_gpu_count_scaling_within_10_percent():
    """NVLS's gain over ring grows with the GPU count (its bytes per GPU are S(n+1)/n against ring's
    2S(n-1)/n). At 4 GPUs the measurement ties ('4: 363.3 / 363.3 (ring chosen)'); NCCL's own table as
    modelled (tuning.cc v2.30.7) picks NVLS there, whose time is within 10 % all the same: a named miss
    of the choice (docs/nccl.md)."""
    rows = timed("h200_8g_by_gpus_nvls") + timed("h200_8g_by_gpus_nvls_off")
    assert len(rows) == 10
    assert all(abs(e) <= 0.10 for e in errors(rows).values())
    for r in rows:
        if not r.nvls:
            assert run(r)[1] == "ring/simple"
            continue
        t_ring, t_nvls = run(r, algorithm="ring")[0], run(r, algorithm="nvls")[0]
        if r.gpus == 4:
            assert run(r)[1] == "nvls/simple" and abs(t_nvls / t_ring - 1) < 0.10
        else:
            assert t_nvls < 0.95 * t_ring and run(r)[1] == "nvls/simple"


def test_gb300_nvl72_within_25_percent():
    rows = timed("gb300_4gpu") + timed("gb300_8gpu") + timed("gb300_64gpu")
    assert len(rows) == 23
    bad = {k: e for k, e in errors(rows).items() if abs(e) > 0.25}
    assert not bad


def test_nccl_debug_choice_statement():
    """'Ring/LL up to 1 MiB, NVLS/Simple from 2 MiB': met at all 20 sizes, the choice made with NCCL's own
    tuner table (tuning.cc v2.30.7: ring/LL 15.0 us + S / 80.6 GB/s against NVLS 25 us + S / 338 GB/s,
    a crossover at ~1.06 MB), the time priced by the fitted tables."""
    choices = [r for r in ROWS if r.table == "h200_choice"]
    assert len(choices) == 20
    for r in choices:
        t_model, schedule = run(r)
        assert schedule == r.choice, (r.size_bytes, schedule)


def test_choice_follows_nccl_table_not_fitted_times():
    """At 2 MiB the fitted tables alone would pick ring/LL; NCCL's table picks NVLS (as NCCL_DEBUG says)."""
    from fabrics.network.nccl.tuner import nccl_tuned_pair

    row = next(r for r in ROWS if r.table == "h200_choice" and r.size_bytes == 2 * MiB)
    links, place = fit_nccl.links_for(row)
    gen = spec_at("2.30.7").generation_for("h200")
    pairs = [("ring", "ll"), ("ring", "ll128"), ("ring", "simple"), ("nvls", "simple")]
    assert nccl_tuned_pair(gen, links, place, "allreduce", row.size_bytes, pairs) == ("nvls", "simple")
    assert nccl_tuned_pair(gen, links, place, "allreduce", 1 * MiB, pairs) == ("ring", "ll")
    assert nccl_tuned_pair(replace(gen, tuning={}), links, place, "allreduce", row.size_bytes, pairs) is None



def test_cuda_graph_row_and_flag():
    """NVIDIA/nccl #1259 (graphs on, 2 GPUs, ~6 us) is met by the graph launch saving; the nccl-tests
    tables are graph off, and so is a spec without cuda_graph."""
    row = next(r for r in ROWS if r.table == "h100_cuda_graph_2gpu")
    graph = replace(spec_at(row.nccl_version), cuda_graph=True)
    acc = yaml.safe_load((fit_nccl.ACCELERATORS / "h100.yaml").read_text())
    node = NvSwitchDomain(name="h100", gpus=2, max_gpus=acc["nvlink_domain_max"], nvlink_ports=acc["nvlink_ports"],
                          nvlink_rate_Bps=acc["nvlink_rate_Bps"], nvls=True)
    on = build_network_model("nccl", ClusterSpec(name="nvswitch", nodes=1, node=node), graph, 2)
    t_on = on.estimate("allreduce", (0, 1), row.size_bytes, *on.system.links((0, 1), Counter({0: 2})))
    t_off, _ = run(replace(row, cuda_graph=False))
    assert t_on.time_s == pytest.approx(row.time_s, rel=0.05)
    saving = spec_at(row.nccl_version).generation_for("h100").cuda_graph_saving_s
    assert t_off - t_on.time_s == pytest.approx(saving) and saving > 0
