"""``gx model``: model cards, HuggingFace config.json import, YAML export, bad model input."""

import json
from pathlib import Path

import pytest

from gxnet.models import load_model_file
from gxnet.testing import model

HF = Path(__file__).resolve().parent.parent / "data" / "hf"


def _results(out):
    return json.loads((out / "results.json").read_text())


def test_deepseek_card_and_dp_attention_memory(pipeline):
    proc, out = pipeline("model", "model=deepseek_v3", "precision=fp8", "accelerator=h200",
                         "parallel=dp_attention", "batch=64", "context=32768", "tracking=off")
    assert proc.returncode == 0, proc.stderr
    r = _results(out)
    m = model("deepseek_v3")
    assert (r["total_params"], r["active_params"], r["mtp_params"]) == (
        m.total_params(), m.active_params(), m.mtp_params())
    assert r["kv_cache_bytes_per_token"] == 70_272
    assert sum(r["params_by_group"].values()) == r["total_params"]
    assert {(k["ffn"], k["layers"]) for k in r["layers"]} == {("dense", 3), ("moe", 58)}
    rank = r["per_rank"]
    assert rank["fits"] and rank["kv_cache_bytes"] == 8 * 32768 * 70_272 and rank["max_batch"] >= 64
    assert rank["max_batch"] % 8 == 0  # whole DP-attention groups


def test_hf_import_matches_the_zoo_and_exports_yaml(pipeline, tmp_path):
    target = tmp_path / "conf" / "model" / "my_model.yaml"
    proc, out = pipeline("model", "model=hf", f"model.config={HF / 'gpt_oss_20b.json'}", "precision=mxfp4",
                         f"export_yaml={target}", "tracking=off")
    assert proc.returncode == 0, proc.stderr
    r = _results(out)
    zoo = model("gpt_oss_20b")
    assert r["model"] == "gpt_oss_20b" and r["total_params"] == zoo.total_params()
    exported = load_model_file(target)
    assert exported.name == "my_model" and exported.total_params() == zoo.total_params()
    # MXFP4 experts (4.25 bits) + BF16 rest, as the checkpoint stores them
    groups = r["params_by_group"]
    bf16 = sum(v for k, v in groups.items() if k != "routed_experts")
    assert r["weights_bytes"] == -(-(groups["routed_experts"] * 17 // 4 + bf16 * 16) // 8)


def test_precision_fields_override_without_plus(pipeline):
    proc, out = pipeline("model", "model=llama3_1_8b", "precision=fp8", "precision.kv_bits=8", "tracking=off")
    assert proc.returncode == 0, proc.stderr
    r = _results(out)
    assert r["precision"]["name"] == "custom" and r["kv_cache_bytes_per_token"] == 131_072 // 2


def test_exported_yaml_works_from_a_user_config_dir(pipeline, tmp_path):
    conf = tmp_path / "conf"
    proc, _ = pipeline("model", "model=hf", f"model.config={HF / 'llama3_1_8b.json'}",
                       f"export_yaml={conf / 'model' / 'my_model.yaml'}", "tracking=off")
    assert proc.returncode == 0, proc.stderr
    proc, out = pipeline("model", "model=my_model", f"hydra.searchpath=[file://{conf}]", "tracking=off")
    assert proc.returncode == 0, proc.stderr
    assert _results(out)["total_params"] == model("llama3_1_8b").total_params()


BAD = [
    (("model=llama3_1_8b", "+model.top_k=2"), "dense model"),
    (("model=deepseek_v3", "model.kv_lora_rank=9000"), "kv_lora_rank=9000"),
    (("model=llama3_1_8b", "model.layers=-4"), "layers=-4"),
    (("model=llama3_1_8b", "~model.vocab"), "vocab"),
]


@pytest.mark.parametrize("overrides,needle", BAD, ids=[b[1] for b in BAD])
def test_bad_model_input_is_one_line_exit_2(pipeline, overrides, needle):
    proc, out = pipeline("model", *overrides, "tracking=off")
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0], proc.stderr
    assert not (out / "results.json").exists()


def test_unknown_model_type_names_the_supported_ones(pipeline, tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"model_type": "mamba", "hidden_size": 768}))
    proc, _ = pipeline("model", "model=hf", f"model.config={cfg}", "tracking=off")
    assert proc.returncode == 2
    assert "model_type 'mamba' is not supported" in proc.stderr and "deepseek_v3" in proc.stderr


# ---- config.json import, in process ----------------------------------------------------------
@pytest.mark.parametrize("node, needle", [({"name": "hf", "config": None}, "needs model.config"),
                                          ({"name": "hf", "config": "/nonexistent/config.json"}, "cannot read")])
def test_hf_without_a_readable_config_is_refused(node, needle):
    from collectives.errors import SpecError
    from pipelines.specs import model_spec

    with pytest.raises(SpecError, match=needle):
        model_spec({"model": node})


@pytest.mark.parametrize("name", sorted(p.stem for p in HF.glob("*.json")))
def test_every_fixture_imports_to_its_zoo_model(name):
    from pipelines.hf_config import model_from_hf_file

    assert model_from_hf_file(HF / f"{name}.json") == model(name)


def _fields(cfg):
    from pipelines.hf_config import spec_fields

    return spec_fields(cfg)


LLAMA = json.loads((HF / "llama3_1_8b.json").read_text())


def test_missing_key_names_it_and_the_supported_types():
    from collectives.errors import SpecError

    cfg = {k: v for k, v in LLAMA.items() if k != "intermediate_size"}
    with pytest.raises(SpecError) as e:
        _fields(cfg)
    msg = str(e.value)
    assert "missing key intermediate_size" in msg and "'llama'" in msg and "qwen3_moe" in msg and "\n" not in msg


def test_family_specific_keys():
    mistral = _fields({**LLAMA, "model_type": "mistral", "sliding_window": 4096})
    assert mistral["attention_pattern"] == ["sliding"] and mistral["window_tokens"] == 4096
    qwen2 = _fields({**LLAMA, "model_type": "qwen2"})
    assert qwen2["qkv_bias"] and not qwen2["o_bias"]
    qwen2_moe = _fields({**LLAMA, "model_type": "qwen2_moe", "num_experts": 60, "num_experts_per_tok": 4,
                         "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632})
    assert (qwen2_moe["shared_experts"], qwen2_moe["shared_expert_width"], qwen2_moe["shared_expert_gate"]) == (1, 5632, True)
    ds = json.loads((HF / "deepseek_v3.json").read_text())
    lite = _fields({**ds, "model_type": "deepseek_v2", "q_lora_rank": None, "topk_method": "greedy",
                    "quantization_config": None, "num_nextn_predict_layers": None})
    assert lite["q_lora_rank"] == 0 and not lite["router_bias"] and "bf16_weights" not in lite
    wrapped = _fields({"model_type": "kimi_k25", "text_config": json.loads((HF / "kimi_k2.json").read_text())})
    assert wrapped["experts"] == 384


ZOO = ["llama3_1_8b", "llama3_1_70b", "llama3_1_405b", "mixtral_8x7b", "mixtral_8x22b", "qwen3_30b_a3b",
       "qwen3_235b_a22b", "deepseek_v3", "deepseek_r1", "kimi_k2", "gpt_oss_20b", "gpt_oss_120b"]
ON_8_H200 = ("accelerator=h200", "precision=fp8", "world=8", "batch=8", "context=8192",
             "fabric=single_eps", "fabric.world=8", "tracking=off")


def _split(name):
    if model(name).is_moe:
        return ("parallel=tp_ep", "parallel.tp=1", "parallel.ep=8")
    return ("parallel=tp_ep", "parallel.tp=8", "parallel.ep=1")


@pytest.mark.parametrize("name", [n if n in ("deepseek_v3", "llama3_1_8b") else pytest.param(n, marks=pytest.mark.slow)
                                  for n in ZOO])
def test_gx_decode_runs_every_zoo_model_on_8_gpus(pipeline, name):
    proc, out = pipeline("decode", f"model={name}", *_split(name), *ON_8_H200)
    assert proc.returncode == 0, proc.stderr[-2000:]
    r = _results(out)
    assert r["model"] == name and r["decode_step_s"] > 0 and r["memory_bytes_per_rank"] <= 141e9


def test_gx_decode_with_dp_attention(pipeline):
    proc, out = pipeline("decode", "model=deepseek_v3", "parallel=dp_attention", *ON_8_H200)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert _results(out)["parallel"]["dpa"] == 8
