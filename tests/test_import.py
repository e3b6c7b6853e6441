"""Hugging Face config.json import (tests/data/hf-configs: real configs, sources in its
SOURCES.md): each zoo model imported from its config has the zoo spec's exact
parameter count and the same op graph, prefill and decode."""

import json
from pathlib import Path

import pytest
from conftest import MODELS, run_cli

from modelcost import SpecError, count_params, load_spec
from modelcost.graph import Phase, Workload
from modelcost.importer import import_config
from modelcost.lower import lower

CONFIGS = Path(__file__).parent / "data" / "hf-configs"
# configs whose zoo spec (of the same name) the import must equal
ZOO = ("deepseek-v3", "gemma2-9b", "gpt-oss-120b", "gpt2", "llama3-8b", "llama3-70b",
       "llama3.1-405b", "mamba2-2.7b", "mixtral-8x7b", "qwen3-30b-a3b")  # fmt: skip


def _nodes(spec, workload):
    g = lower(spec, workload)
    return [(n.name, n.count, n.op, n.inputs, n.out_bytes) for n in g.nodes]


@pytest.mark.parametrize("name", ZOO)
def test_an_imported_config_is_its_zoo_spec(name: str) -> None:
    imported = load_spec(CONFIGS / f"{name}.json")  # compile takes a config.json directly
    zoo = load_spec(MODELS / f"{name}.model")
    a, b = count_params(imported), count_params(zoo)
    assert (a.total, a.active, a.components) == (b.total, b.active, b.components)
    for w in (Workload(Phase.prefill, 2, 512), Workload(Phase.decode, 4, context=1024)):
        assert _nodes(imported, w) == _nodes(zoo, w)


def test_the_import_is_canonical_readable_and_cites_its_fields(tmp_path) -> None:
    out = tmp_path / "llama.model"
    r = run_cli("import", str(CONFIGS / "llama3-8b.json"), "-o", str(out))
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert text.startswith("# Imported from llama3-8b.json (model_type llama)")
    assert "num_key_value_heads 8" in text and "vocab = 128_256" in text
    assert run_cli("fmt", "--check", str(out)).returncode == 0
    compiled = run_cli("compile", str(CONFIGS / "llama3-8b.json"), "--hw", "h100")
    assert compiled.returncode == 0 and "llama3_8b" in compiled.stdout


def test_an_unknown_model_type_is_exit_2_pointing_at_it() -> None:
    r = run_cli("import", str(CONFIGS / "t5-base.json"))
    assert r.returncode == 2 and "model_type 't5' cannot be imported yet" in r.stderr
    assert '"model_type"' in r.stderr and "^" in r.stderr and "Traceback" not in r.stderr


def test_a_field_the_importer_cannot_represent_is_refused_by_name(tmp_path) -> None:
    config = json.loads((CONFIGS / "qwen3-30b-a3b.json").read_text())
    config["mlp_only_layers"] = [0, 1]
    bad = tmp_path / "q.json"
    bad.write_text(json.dumps(config, indent=2))
    with pytest.raises(SpecError) as err:
        import_config(bad.read_text(), str(bad))
    assert err.value.message.startswith("`mlp_only_layers` = [0, 1]: dense MLP layers")
    assert err.value.line > 0
    broken = tmp_path / "broken.json"
    broken.write_text('{"model_type": "llama",\n "hidden_size": }')
    r = run_cli("compile", str(broken), "--hw", "h100")
    assert r.returncode == 2 and "not JSON" in r.stderr and ":2:" in r.stderr


def test_a_checkpoints_quantization_becomes_its_recipe(tmp_path) -> None:
    # DeepSeek-V3's quantization_config: fp8, weight_block_size [128, 128] → fp8_block;
    # gpt-oss's mxfp4 → its experts' mxfp4_weights (the family's own rule)
    text = import_config((CONFIGS / "deepseek-v3.json").read_text(), "deepseek-v3.json")
    assert "recipe = fp8_block" in text
    assert "recipe = mxfp4_weights" in import_config(
        (CONFIGS / "gpt-oss-120b.json").read_text(), "gpt-oss-120b.json"
    )
    config = json.loads((CONFIGS / "llama3-8b.json").read_text())
    config["quantization_config"] = {"quant_method": "bitsandbytes", "load_in_8bit": True}
    with pytest.raises(SpecError, match="has no recipe here"):
        import_config(json.dumps(config, indent=2), "q.json")
    config["quantization_config"] = {"quant_method": "awq", "bits": 4, "group_size": 128}
    assert "recipe = w4a16" in import_config(json.dumps(config), "q.json")


def test_mamba_ssm_configs_have_no_model_type_and_are_recognized() -> None:
    # state-spaces' own format: `ssm_cfg` instead of a model_type; the vocabulary is
    # padded to a multiple of pad_vocab_size_multiple: ⌈50,277 / 16⌉ · 16 = 50,288
    text = import_config((CONFIGS / "mamba2-2.7b.json").read_text(), "mamba2-2.7b.json")
    assert "vocab = 50_288" in text and "model_type mamba_ssm" in text
