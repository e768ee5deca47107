"""Bad config input, every pipeline: exit 2, one line on stderr, no traceback, nothing written.

The corpus is a table: cases generated from ``pipelines.schema.FIELD_KINDS`` for every numeric
field in every pipeline's default config (so a new field is covered the day it gets a kind),
and hand-written cases for keys, options and values that no kind describes.

Harness: this process imports every pipeline once; each case runs in a forked child
(``forked.run_forked``) that calls the pipeline's entry point with a patched ``sys.argv`` in an
empty working directory, with a 20 s alarm; the parent reads the exit status, stderr and the
child's peak RSS. A handful of cases also run end to end as real subprocesses.
"""

from __future__ import annotations

import functools
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from forked import run_forked

from pipelines.cli import PIPELINES

ROOT = Path(__file__).resolve().parents[2]
LIMIT_S = 20
LIMIT_RSS_BYTES = 2**30

MODULES = {name: importlib.import_module(f"pipelines.{name}") for name in PIPELINES}

# bad values per field kind: the first two of each kind are used for every field of that kind
BAD_VALUES = {
    "count": ["nan", "0", "-2", "5Q", "inf", "1.5"],
    "index": ["-1", "nan", "inf"],
    "size_bytes": ["0", "inf", "-4KiB", "4KB/s"],
    "rate_Bps": ["inf", "0", "nan", "-400Gb/s", "400Gb"],
    "time_s": ["-1us", "nan", "inf", "5 parsecs"],
    "timeout_s": ["0s", "inf", "-1s", "nan"],
    "fraction": ["2", "nan", "-0.1"],
    "positive": ["0", "inf", "-1"],
    "nonnegative": ["-1", "nan"],
}


@functools.cache
def _numeric_fields() -> tuple[tuple[str, str, str], ...]:
    """(pipeline, path, kind) of every kind-checked field of every pipeline's default config."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from pipelines.app import CONF_DIR
    from pipelines.schema import FIELD_KINDS

    fields = []
    with initialize_config_dir(version_base=None, config_dir=CONF_DIR):
        for name in PIPELINES:
            cfg = OmegaConf.to_container(compose(config_name=name), resolve=False)
            for path in sorted(_paths(cfg)):
                if path in FIELD_KINDS:
                    fields.append((name, path, FIELD_KINDS[path]))
    return tuple(fields)


def _paths(node, prefix=""):
    """Dotted paths reachable by an override (no list elements)."""
    if isinstance(node, dict):
        for key, value in node.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            if isinstance(value, dict):
                yield from _paths(value, path)
            elif not isinstance(value, list) or all(not isinstance(v, (dict, list)) for v in value):
                yield path


def _generated() -> list[tuple[str, tuple[str, ...], str]]:
    """One case per distinct field path (a path shared by pipelines, e.g. ``model.layers``, goes
    to each of them in turn), its bad value taken in turn from its kind's list."""
    by_path: dict[str, list[tuple[str, str]]] = {}
    for pipeline, path, kind in _numeric_fields():
        by_path.setdefault(path, []).append((pipeline, kind))
    cases, turn = [], 0
    for path, owners in sorted(by_path.items()):
        pipeline, kind = owners[turn % len(owners)]
        value = BAD_VALUES[kind][turn % len(BAD_VALUES[kind])]
        cases.append((pipeline, (f"{path}={value}",), path))
        turn += 1
    return cases


# (pipeline, overrides, a word the one line must contain)
NAMED = [
    # the cases of the bad-input audit
    ("decode", ("batch=nan",), "batch"),
    ("decode", ("context=inf",), "context"),
    ("collective", ("size=nan",), "size"),
    ("decode", ("fabric.link_rate=nan",), "fabric.link_rate"),
    ("decode", ("fabric.link_rate=inf",), "fabric.link_rate"),
    ("decode", ("accelerator.hbm_bandwidth_Bps=inf",), "hbm_bandwidth_Bps"),
    ("replay", ("timeout=0s",), "timeout"),
    ("decode", ("+batchsize=64",), "did you mean 'batch'"),
    ("decode", ("fabirc=all_ocs",), "did you mean 'fabric'"),
    ("decode", ("context=5Q",), "K/M/G"),
    # unknown keys, anywhere
    ("decode", ("+anything=1",), "anything"),
    ("decode", ("++anything=1",), "anything"),
    ("decode", ("+fabric.link_rat=1",), "did you mean 'link_rate'"),
    ("decode", ("fabric.link_rat=1",), "did you mean 'link_rate'"),
    ("decode", ("+model.layerz=3",), "did you mean 'layers'"),
    ("decode", ("model.layerz=3",), "did you mean 'layers'"),
    ("decode", ("parallel.kpv=4",), "did you mean 'kvp'"),
    ("decode", ("+parallel.foo=4",), "foo"),
    ("decode", ("+accelerator.hbm_bandwith_Bps=1",), "did you mean 'hbm_bandwidth_Bps'"),
    ("decode", ("+batch=3",), "batch=3"),
    ("decode", ("contxt=32K",), "did you mean 'context'"),
    ("decode", ("modle=megatron_5t",), "did you mean 'model'"),
    ("search", ("serch.within=0.1",), "did you mean 'search'"),
    ("search", ("search.withn=0.1",), "did you mean 'within'"),
    ("search", ("+batchsize=4",), "did you mean 'batch'"),
    ("splits", ("wrld=64",), "did you mean 'world'"),
    ("splits", ("+batch=2",), "batch"),
    ("demand", ("+contexts=5M",), "did you mean 'context'"),
    ("collective", ("colective=alltoall",), "did you mean 'collective'"),
    ("collective", ("+sizes=4KiB",), "did you mean 'size'"),
    ("collective", ("topology.dimz=3",), "did you mean 'dims'"),
    ("plan", ("port=18",), "did you mean 'ports'"),
    ("plan", ("+meshs=[]",), "did you mean 'meshes'"),
    ("alltoallv", ("node=2",), "did you mean 'nodes'"),
    ("alltoallv", ("workload.byte_per_rank=1MiB",), "did you mean 'bytes_per_rank'"),
    ("prefill", ("prompt_token=128",), "did you mean 'prompt_tokens'"),
    ("prefill", ("+request=2",), "did you mean 'requests'"),
    ("calibrate", ("repeat=3",), "did you mean 'repeats'"),
    ("replay", ("iteration=3",), "did you mean 'iterations'"),
    ("replay", ("fault.rnk=0",), "did you mean 'rank'"),
    ("report", ("+swep=abc",), "did you mean 'sweep'"),
    ("report", ("pipline=decode",), "did you mean 'pipeline'"),
    ("report", ("tracking.experment=x",), "did you mean 'experiment'"),
    # mistyped options of a config group
    ("decode", ("fabric=all_ocx",), "did you mean 'all_ocs'"),
    ("decode", ("model=megatron_5",), "did you mean 'megatron_5t'"),
    ("decode", ("accelerator=h10",), "did you mean 'h100'"),
    ("decode", ("accelerator=tpu9",), "tpu9"),
    ("decode", ("network=simlete",), "did you mean 'simlette'"),
    ("decode", ("parallel=helx",), "did you mean 'helix'"),
    ("decode", ("precision=fp5",), "precision"),
    ("decode", ("compute=measure",), "did you mean 'measured'"),
    ("decode", ("tracking=of",), "did you mean 'off'"),
    ("decode", ("experiment=figure4_megatrn",), "did you mean 'figure4_megatron'"),
    ("decode", ("+experiment=nothing",), "experiment"),
    ("search", ("fabric=hybird",), "did you mean 'hybrid'"),
    ("search", ("model=gpt_oss_12b",), "did you mean 'gpt_oss_120b'"),
    ("splits", ("model=qwen3",), "model"),
    ("demand", ("model=megatron_1",), "did you mean 'megatron_1t'"),
    ("collective", ("topology=hypercub",), "did you mean 'hypercube'"),
    ("collective", ("fabric=single_epss",), "did you mean 'single_eps'"),
    ("collective", ("fabric=all_eps", "network=simlet"), "did you mean 'simlette'"),
    ("alltoallv", ("scheduler=variopth",), "did you mean 'variopath'"),
    ("alltoallv", ("platform=r5080",), "platform"),
    ("alltoallv", ("workload=zipff",), "did you mean 'zipf'"),
    ("prefill", ("routing=topkk",), "did you mean 'topk'"),
    ("prefill", ("fabric=pcee",), "did you mean 'pcie'"),
    ("prefill", ("precision=bf16",), "precision"),
    ("calibrate", ("model=megatron_5tt",), "did you mean 'megatron_5t'"),
    ("replay", ("tracking=mlfow",), "did you mean 'mlflow'"),
    ("report", ("tracking=onn",), "tracking"),
    ("plan", ("ray=remote",), "ray"),
    # numbers inside group nodes that the defaults do not select, and lists
    ("collective", ("fabric=all_eps", "fabric.link_rate=inf"), "fabric.link_rate"),
    ("collective", ("fabric=single_eps", "fabric.world=nan"), "fabric.world"),
    ("collective", ("fabric=all_eps", "group_size=0"), "group_size"),
    ("collective", ("size=[4KiB,nan]",), "size"),
    ("collective", ("size=[4KiB,0]",), "size"),
    ("collective", ("size=0..16MiB",), "size"),
    ("collective", ("size=1KiB..infKiB",), "size"),
    ("collective", ("topology=ring", "topology.n=nan"), "topology.n"),
    ("collective", ("topology=circulant", "topology.offsets=[1,nan]"), "topology.offsets"),
    ("collective", ("topology=block_fold", "topology.blocks=[3,0]"), "topology.blocks"),
    ("plan", ("meshes=[{shape:[4,64],collective:allreduce,payloads:[4KiB,nan]}]",), "meshes.payloads"),
    ("plan", ("meshes=[{shape:[4,64],collective:allreduce,payloads:[4KiB,0]}]",), "meshes.payloads"),
    ("decode", ("fabric=single_ocs", "fabric.hop_latency=nan"), "fabric.hop_latency"),
    ("decode", ("fabric=pcie", "fabric.planning_cost_per_activation=-1us"), "planning_cost_per_activation"),
    ("decode", ("fabric=pcie", "fabric.nodes=0"), "fabric.nodes"),
    ("decode", ("network=simlette", "network.buffer=-16KiB"), "network.buffer"),
    ("decode", ("network=simlette", "network.ocs_multiplicity=nan"), "network.ocs_multiplicity"),
    ("decode", ("accelerator=h100", "accelerator.eta_memory.values=[0.3,0.6,nan,0.9]"), "eta_memory"),
    ("decode", ("accelerator.peak_flops=-1",), "peak_flops"),
    ("decode", ("accelerator.kernel_launch_s=inf",), "kernel_launch_s"),
    ("decode", ("+precision.kv_bits=nan",), "precision.kv_bits"),
    ("decode", ("+precision.kv_bits=0",), "precision.kv_bits"),
    ("decode", ("parallel.tp=nan",), "parallel.tp"),
    ("decode", ("model.window_tokens=-1",), "window_tokens"),
    ("decode", ("routing=zipf", "routing.zipf_s=inf"), "zipf_s"),
    ("decode", ("ray.num_cpus=0",), "ray.num_cpus"),
    ("decode", ("ray.batch_size=-1",), "batch_size"),
    ("decode", ("tracking.enabled=maybe",), "enabled"),
    ("decode", ("batch=true",), "batch"),
    ("decode", ("batch=[1,2]",), "batch"),
    ("decode", ("world=1e400",), "world"),
    ("decode", ("context=5Mi5",), "context"),
    ("alltoallv", ("workload=moe", "workload.top_k=nan"), "workload.top_k"),
    ("alltoallv", ("workload=uniform", "workload.bytes_per_rank=inf"), "bytes_per_rank"),
    ("alltoallv", ("scheduler=milp", "scheduler.time_limit_s=0"), "time_limit_s"),
    ("alltoallv", ("scheduler=milp", "scheduler.gap_tolerance=nan"), "gap_tolerance"),
    ("alltoallv", ("platform.pcie_rate=inf",), "platform.pcie_rate"),
    ("alltoallv", ("platform.network.oversubscription=0",), "oversubscription"),
    ("prefill", ("points=[{ep:16,nodes:nan}]",), "points.nodes"),
    ("prefill", ("points=[{ep:0,nodes:2}]",), "points.ep"),
    ("calibrate", ("max_kernel_bytes=nan",), "max_kernel_bytes"),
    ("calibrate", ("max_kernel_bytes=lots",), "max_kernel_bytes"),
    ("replay", ("predict.nodes=0",), "predict.nodes"),
    ("replay", ("predict.nodes=many",), "predict.nodes"),
    ("search", ("search.within=inf",), "search.within"),
    # rules across fields, checked while the specs are built (after Hydra made the run folder,
    # which must be gone again)
    ("decode", ("parallel.kvp=3", "parallel.tpa=128"), "power of two"),
    ("decode", ("batch=32",), "batch"),
    ("search", ("world=48",), "world"),
    ("splits", ("world=3",), "world"),
    ("demand", ("parallel.ep=512", "parallel.tpe=1"), "experts"),
    ("collective", ("topology.ranks=12",), "power of two"),
    ("collective", ("schedule=fastest",), "schedule"),
    ("plan", ("world=255",), "world"),
    ("alltoallv", ("schedulers=[variopath,nosuch]",), "nosuch"),
    ("replay", (), "schedule"),
    # user config dirs that do not exist, sweeps with one bad value
    ("decode", ("--config-dir", "no/such/dir"), "no/such/dir"),
    ("decode", ("--config-path=/no/such/dir",), "/no/such/dir"),
    ("search", ("hydra.searchpath=[file:///no/such/dir]",), "/no/such/dir"),
    ("decode", ("hydra.searchpath=[file:///no/such/dir]", "model=mine"), "/no/such/dir"),
    ("decode", ("hydra.searchpath=file:///x",), "hydra.searchpath"),
    ("decode", ("-m", "batch=1,nan"), "batch"),
    ("decode", ("-m", "fabric=all_eps,all_ocx"), "did you mean 'all_ocs'"),
    ("decode", ("-m", "batch=1,2", "+batchsize=3"), "did you mean 'batch'"),
    ("search", ("-m", "context=32K,5Q"), "K/M/G"),
    ("collective", ("-m", "size=4KiB,0"), "size"),
    # model cards and the sync of a sweep
    ("model", ("model=llama3_1_88b",), "did you mean 'llama3_1_8b'"),
    ("model", ("model=hf", "model.config=/no/such.json"), "model.config"),
    ("model", ("world=0",), "world"),
    ("sync", ("dir=/no/such/dir",), "not a directory"),
    # a network model on a fabric family it does not run on, keys of the other family
    ("decode", ("fabric=pcie", "network=analytical"), "network=analytical does not run on fabric=pcie"),
    ("decode", ("fabric=pcie", "network=simlette"), "choose network=flow"),
    ("collective", ("fabric=pcie", "network=simlette"), "does not run on fabric=pcie"),
    ("prefill", ("network=analytical",), "does not run on fabric=pcie"),
    ("decode", ("fabric.platform=fig1",), "platform"),
    ("decode", ("network=flow", "fabric.link_rate=0"), "fabric.link_rate"),
    ("collective", ("fabric=all_eps", "network=flow", "fabric.link_rate=nan"), "fabric.link_rate"),
    # GPU fabrics: accelerators without NVLink, domains too small, worlds that do not fill nodes, keys
    ("decode", ("accelerator=rx00", "fabric=nvswitch"), "accelerator=rx00 has no NVLink"),
    ("decode", ("accelerator=rtx5090", "fabric=gpu_cluster", "world=16"), "accelerator=rtx5090 has no NVLink"),
    ("decode", ("accelerator=h200", "fabric=nvswitch", "world=16"), "use fabric=gpu_cluster"),
    ("decode", ("-m", "accelerator=h200", "fabric=nvswitch", "world=8,16"), "use fabric=gpu_cluster"),
    ("decode", ("accelerator=gb300", "fabric=gpu_cluster", "world=64"), "does not fill whole nodes"),
    ("decode", ("accelerator=h200", "fabric=gpu_cluster", "world=32", "fabric.nodes=2"), "set fabric.nodes=4"),
    ("decode", ("accelerator=h200", "fabric=gpu_cluster", "world=16", "fabric.nics_per_node=0"), "need NICs"),
    ("decode", ("accelerator=h200", "fabric=nvswitch", "+fabric.nics_per_node=8"), "belongs to fabric=gpu_cluster"),
    ("decode", ("accelerator=h200", "fabric=nvswitch", "+fabric.link_rate=400Gb/s"), "other fabric family"),
    ("decode", ("accelerator=h200", "fabric=nvswitch", "+fabric.rails=8"), "rails"),
    ("decode", ("fabric=gpu_cluster", "fabric.nic_rate=inf"), "fabric.nic_rate"),
    ("decode", ("fabric=gpu_cluster", "fabric.nic_latency=-1us"), "fabric.nic_latency"),
    ("decode", ("fabric=gpu_cluster", "fabric.oversubscription=0"), "fabric.oversubscription"),
    ("decode", ("fabric=gpu_cluster", "fabric.nics_per_node=-1"), "fabric.nics_per_node"),
    ("decode", ("fabric=nvswitch", "fabric.hop_latency=nan"), "fabric.hop_latency"),
    ("decode", ("accelerator=h200", "fabric=nvswitch", "world=8", "network=simlette"), "does not run on fabric=nvswitch"),
    ("collective", ("fabric=nvswitch",), "accelerator="),
    ("collective", ("fabric=nvswitch", "accelerator=rx00"), "has no NVLink"),
    ("collective", ("fabric=nvswitch", "accelerator=h200", "fabric.world=1"), "at least 2"),
    ("collective", ("fabric=nvswitch", "accelerator=h200", "group_size=9"), "group_size"),
    ("collective", ("fabric=nvswitch", "accelerator=h200", "schedule=two_shot"), "schedule"),
    ("collective", ("fabric=gpu_cluster", "accelerator=h200"), "fabric.nodes"),
]

GENERATED = _generated()
CASES = GENERATED + NAMED


def _params(cases):
    """Every named case, and the first generated case of each (pipeline, field kind) in the
    default suite; the other generated cases (the same check on further fields of that kind) are
    slow checks."""
    kinds = {}
    for pipeline, path, kind in _numeric_fields():
        kinds.setdefault(path, kind)
    seen, params = set(), []
    for case in cases:
        pipeline, args, _ = case
        generated = case in GENERATED
        kind = kinds[args[0].split("=", 1)[0]] if generated else None
        first = (pipeline, kind) not in seen
        if generated:
            seen.add((pipeline, kind))
        params.append(pytest.param(*case, id=f"{pipeline}:{' '.join(args)}",
                                   marks=[pytest.mark.slow] if generated and not first else []))
    return params


def run_case(pipeline: str, args: tuple[str, ...], tmp: Path) -> tuple[int | None, str, int]:
    """(exit code, stderr, peak RSS in bytes) of one case run in a forked child; None past LIMIT_S."""
    workdir = tmp / "cwd"
    workdir.mkdir()
    try:
        proc, rss = run_forked(MODULES[pipeline].main, [f"gx {pipeline}", *args], cwd=workdir,
                               env={"GX_TRACKING": "false"}, timeout_s=LIMIT_S)
    except subprocess.TimeoutExpired:
        return None, "", 0
    return proc.returncode, proc.stderr, rss


@pytest.mark.parametrize("pipeline,args,needle", _params(CASES))
def test_bad_config_input_is_one_line_and_exit_2(pipeline, args, needle, tmp_path):
    code, stderr, rss = run_case(pipeline, args, tmp_path)
    assert code is not None, f"over {LIMIT_S} s"
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert code == 2, (code, stderr[-3000:])
    assert "Traceback" not in stderr
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: ") and needle in lines[0], lines[0]
    assert rss < LIMIT_RSS_BYTES, rss
    assert not any((tmp_path / "cwd").iterdir()), list((tmp_path / "cwd").rglob("*"))


def test_the_corpus_covers_every_pipeline_with_many_cases():
    assert {c[0] for c in CASES} == set(PIPELINES)
    assert len(CASES) >= 160, len(CASES)


END_TO_END = [
    ("decode", "batch=nan"),
    ("decode", "fabirc=all_ocs"),
    ("collective", "size=nan"),
    ("replay", "timeout=0s"),
]


@pytest.mark.parametrize("pipeline,arg", END_TO_END)
def test_end_to_end_subprocess_through_gx(pipeline, arg, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), GX_TRACKING="false")
    proc = subprocess.run([sys.executable, "-m", "pipelines.cli", pipeline, arg], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert not any(tmp_path.iterdir())


def test_gx_help_lists_each_pipeline_on_one_line_and_nothing_else():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "pipelines.cli", "--help"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    listed = [ln.split()[0] for ln in proc.stdout.splitlines() if ln.startswith("  ")]
    assert listed == list(PIPELINES)
    assert set(PIPELINES) == {p.stem for p in (ROOT / "conf").glob("*.yaml")}  # a pipeline has a config
    assert all((ROOT / "pipelines" / f"{name}.py").exists() for name in PIPELINES)
