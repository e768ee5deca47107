"""pipelines.nccl_params / fabrics.network.nccl.params: conf/network/nccl.yaml -> NcclSpec, one-line errors."""

from __future__ import annotations

import copy

import pytest

from collectives.errors import SpecError
from pipelines.nccl_params import default_mapping, nccl_spec

BASE = default_mapping()


def spec_with(**changes):
    d = copy.deepcopy(BASE)
    d.update(changes)
    return nccl_spec(d)


def test_committed_file_parses_with_units_and_generations():
    spec = nccl_spec(BASE)
    assert (spec.algorithm, spec.protocol) == ("auto", "auto")
    hopper = spec.generation_for("h200")
    assert hopper is spec.generation_for("h100") and hopper.name == "hopper_hgx"
    assert spec.generation_for("gb300").name == "blackwell_nvl72"
    assert hopper.base("ring", "ll") == pytest.approx(6.6e-6)  # tuning.cc baseLatencies, "6.6us"
    assert hopper.channel_count("nvls") == 16 and spec.generation_for("gb300").channel_count("nvls") == 24
    assert 0 < hopper.eff("nvlink", "nvls", "simple") <= 1


def test_minimal_mapping_takes_generations_from_the_file_and_overrides_win():
    spec = nccl_spec({"name": "nccl", "algorithm": "NVLS", "protocol": "simple"})
    assert spec.algorithm == "nvls" and spec.protocol == "simple"
    assert [g.name for g in spec.generations] == list(BASE["generations"])


@pytest.mark.parametrize("changes, words", [
    ({"algorithm": "butterfly"}, "network.algorithm='butterfly' is unknown"),
    ({"protocol": "ll256"}, "network.protocol='ll256' is unknown"),
    ({"algorithm": "nvls", "protocol": "ll"}, "runs the simple protocol only"),
    ({"flavour": 1}, "network.flavour is not a known key"),
])
def test_bad_top_level_values_are_one_line(changes, words):
    with pytest.raises(SpecError) as e:
        spec_with(**changes)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_bad_generation_values_name_the_key():
    d = copy.deepcopy(BASE)
    d["generations"]["hopper_hgx"]["efficiency"]["nvlink"]["ring"]["simple"] = 1.5
    with pytest.raises(SpecError, match=r"hopper_hgx\.efficiency\.nvlink\.ring\.simple=1\.5 must be in \[0\.0, 1\.0\]"):
        nccl_spec(d)
    d = copy.deepcopy(BASE)
    d["generations"]["hopper_hgx"]["hop_latency"]["nvlink"]["ring"]["ll"] = "fast"
    with pytest.raises(SpecError, match=r"hop_latency\.nvlink\.ring\.ll='fast' is not a valid time"):
        nccl_spec(d)
    d = copy.deepcopy(BASE)
    d["generations"]["hopper_hgx"]["hop_latency"]["infiniband"] = {}
    with pytest.raises(SpecError, match="infiniband is not a transport"):
        nccl_spec(d)
    d = copy.deepcopy(BASE)
    d["generations"]["blackwell_nvl72"]["accelerators"] = ["h100"]
    with pytest.raises(SpecError, match="accelerator h100 is listed by two generations"):
        nccl_spec(d)


def test_unknown_accelerator_names_the_known_ones():
    with pytest.raises(SpecError, match="no parameters for accelerator rx00; known: h100, h200"):
        nccl_spec(BASE).generation_for("rx00")


def test_cuda_graph_flag_resolved_from_the_engine():
    """network.cuda_graph=auto: true where the engine resolves to cuda_graph (decode on a GPU fabric),
    false without an engine group (gx collective = nccl-tests without -G); the spec gets a boolean."""
    from pipelines.network import network_spec, nccl_with_graph_flag

    gpu = {"fabric": {"name": "nvswitch"}, "network": {"name": "nccl", "cuda_graph": "auto"}}
    assert nccl_with_graph_flag({**gpu, "engine": {"name": "auto"}}, gpu["network"])["cuda_graph"] is True
    assert nccl_with_graph_flag({**gpu, "engine": {"name": "eager"}}, gpu["network"])["cuda_graph"] is False
    assert nccl_with_graph_flag(gpu, gpu["network"])["cuda_graph"] is False  # no engine group: graph off
    forced = {**gpu, "engine": {"name": "auto"}, "network": {"name": "nccl", "cuda_graph": False}}
    assert network_spec(forced)[1].cuda_graph is False
    assert network_spec({**gpu, "engine": {"name": "auto"}})[1].cuda_graph is True
    with pytest.raises(SpecError, match="network.cuda_graph='sometimes'"):
        nccl_spec({"cuda_graph": "sometimes"})
