"""Hugging Face config.json import (tests/data/hf-configs: real configs, sources in its
SOURCES.md): each zoo model imported from its config has the zoo spec's exact
parameter count and the same op graph, prefill and decode."""

import json
from pathlib import Path

import pytest
from conftest import MODELS, ROOT, run_cli

from modelcost import SpecError, count_params, load_spec, parse_spec
from modelcost.importers import import_config
from modelcost.ir.graph import Phase, Workload
from modelcost.language.spec import walk
from modelcost.lowering.lower import lower

CONFIGS = Path(__file__).parent / "data" / "hf-configs"
# configs whose zoo spec (of the same name) the import must equal
ZOO = ("bert-base-uncased", "deepseek-v3", "gemma2-9b", "gpt-oss-120b", "gpt2", "llama3-8b",
       "llama3-70b", "llama3.1-405b", "llava-1.5-7b", "mamba2-2.7b", "mixtral-8x7b",
       "qwen3-30b-a3b", "qwen3-next-80b-a3b", "t5-base")  # fmt: skip


def _nodes(spec, workload):
    g = lower(spec, workload)
    return [(n.name, n.count, n.op, n.inputs, n.out_bytes) for n in g.nodes]


@pytest.mark.parametrize("name", ZOO)
def test_an_imported_config_is_its_zoo_spec(name: str) -> None:
    imported = load_spec(CONFIGS / f"{name}.json")  # compile takes a config.json directly
    zoo = load_spec(MODELS / f"{name}.model")
    a, b = count_params(imported), count_params(zoo)
    assert (a.total, a.active, a.components) == (b.total, b.active, b.components)
    assert (a.streams, a.apart) == (b.streams, b.apart)  # encoders, towers, MTP modules
    decodes = any(op.decodes for op, _ in walk(zoo.body, streams=False))
    for w in (Workload(Phase.prefill, 2, 512), Workload(Phase.decode, 4, context=1024),
              Workload(Phase.train, 2, 512)):  # fmt: skip
        if w.phase is not Phase.decode or decodes:
            assert _nodes(imported, w) == _nodes(zoo, w)


def test_the_import_is_canonical_readable_and_cites_its_fields(tmp_path) -> None:
    out = tmp_path / "llama.model"
    r = run_cli("import", str(CONFIGS / "llama3-8b.json"), "-o", str(out))
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert text.startswith("# Imported from llama3-8b.json (model_type llama)")
    assert "num_key_value_heads 8" in text and "vocab = 128_256" in text
    # no _name_or_path in the file: titled by its architecture and the file
    assert 'title = "LlamaForCausalLM from llama3-8b.json"' in text
    assert run_cli("fmt", "--check", str(out)).returncode == 0
    compiled = run_cli("compile", str(CONFIGS / "llama3-8b.json"), "--hw", "h100")
    assert compiled.returncode == 0
    assert compiled.stdout.startswith("LlamaForCausalLM from llama3-8b.json on NVIDIA H100")


def test_an_unknown_model_type_is_exit_2_pointing_at_it(tmp_path) -> None:
    config = tmp_path / "falcon.json"
    config.write_text('{\n  "model_type": "falcon",\n  "hidden_size": 4544\n}\n')
    r = run_cli("import", str(config))
    assert r.returncode == 2 and 'model_type "falcon" cannot be imported yet' in r.stderr
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


def test_a_checkpoints_quantization_becomes_its_recipe() -> None:
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


def test_families_without_a_zoo_config_import_to_their_published_counts() -> None:
    # ViT-L/16 from the values its zoo spec cites (google/vit-large-patch16-224's
    # config: no copy in the reference set): the zoo spec's count and graph
    vit = {"model_type": "vit", "hidden_size": 1024, "num_hidden_layers": 24,
           "num_attention_heads": 16, "intermediate_size": 4096, "image_size": 224,
           "patch_size": 16, "id2label": {str(i): f"class {i}" for i in range(1000)}}  # fmt: skip
    text = import_config(json.dumps(vit, indent=2), "vit-l16.json")
    assert "id2label (1000 entries)" in text
    spec, zoo = parse_spec(text, "<vit>"), load_spec(MODELS / "vit-l16.model")
    assert count_params(spec).total == count_params(zoo).total == 304_326_632
    w = Workload(Phase.prefill, 2)
    assert _nodes(spec, w) == _nodes(zoo, w)
    # Phi-3-mini (microsoft/Phi-3-mini-4k-instruct model card: hidden 3072, 32 layers of
    # 32 heads, intermediate 8192, vocabulary 32,064, untied): 2 · 32,064 · 3072
    # embeddings and head + 32 · (3072·9216 qkv + 3072² o + 3072·16,384 gate_up +
    # 8192·3072 down + 2 · 3072 norms) + 3072 = 3,821,079,552
    phi3 = {"model_type": "phi3", "hidden_size": 3072, "num_hidden_layers": 32,
            "num_attention_heads": 32, "num_key_value_heads": 32, "intermediate_size": 8192,
            "vocab_size": 32064, "sliding_window": 2047}  # fmt: skip
    spec = parse_spec(import_config(json.dumps(phi3), "phi3.json"), "<phi3>")
    assert count_params(spec).total == 3_821_079_552


def test_gemma3_layers_repeat_five_local_to_one_global_and_the_rest_follow() -> None:
    # Gemma 3 27B's text model (google/gemma-3-27b-pt model card; no copy of its config
    # in the reference set): 62 layers, every 6th global, so ten repeats of six and two
    # local layers after them. Parameters: 262,208 · 5376 tied embeddings, 62 layers of
    # q 5376·4096 + k, v 5376·2048 + o 4096·5376 + q/k norms 2·128 + gate, up
    # 2·5376·21,504 + down 21,504·5376 + 4 norms of 5376, and the final norm
    g3 = {"model_type": "gemma3_text", "hidden_size": 5376, "num_hidden_layers": 62,
          "num_attention_heads": 32, "num_key_value_heads": 16, "head_dim": 128,
          "intermediate_size": 21504, "vocab_size": 262208, "sliding_window": 1024,
          "sliding_window_pattern": 6}  # fmt: skip
    text = import_config(json.dumps(g3), "gemma3-27b.json")
    assert "repeat (layers - 2) / 6 {" in text
    spec = parse_spec(text, "<gemma3>")
    layer = 5376 * 4096 * 2 + 5376 * 2048 * 2 + 2 * 128 + 3 * 5376 * 21504 + 4 * 5376
    assert count_params(spec).total == 262208 * 5376 + 62 * layer + 5376 == 27_009_346_304
    g = lower(spec, Workload(Phase.decode, 1, context=8192))
    windows = sorted((n.op.window, n.count) for n in g.nodes if n.op.kind == "SDPA")
    assert windows == [(0, 10), (1024, 1), (1024, 1)] + [(1024, 10)] * 5


def test_qwen2_moe_has_a_gated_shared_expert() -> None:
    # Qwen1.5-MoE-A2.7B (Qwen/Qwen1.5-MoE-A2.7B model card: hidden 2048, 24 layers of 16
    # heads, 60 experts of 1408 (top 4), a shared expert of 5632, vocabulary 151,936,
    # untied): per layer q, k, v with biases 3 · (2048² + 2048) + o 2048² + 60 experts
    # 3 · 2048 · 1408 + shared 3 · 2048 · 5632 + its gate 2048 + router 2048 · 60 +
    # 2 norms of 2048; plus embeddings, head and the final norm: 14,315,784,192 (14.3 B)
    q = {"model_type": "qwen2_moe", "hidden_size": 2048, "num_hidden_layers": 24,
         "num_attention_heads": 16, "num_key_value_heads": 16, "moe_intermediate_size": 1408,
         "shared_expert_intermediate_size": 5632, "num_experts": 60,
         "num_experts_per_tok": 4, "vocab_size": 151936}  # fmt: skip
    spec = parse_spec(import_config(json.dumps(q), "qwen1.5-moe.json"), "<qwen2_moe>")
    layer = (3 * (2048 * 2048 + 2048) + 2048 * 2048 + 60 * 3 * 2048 * 1408 + 3 * 2048 * 5632
             + 2048 + 2048 * 60 + 2 * 2048)  # fmt: skip
    assert count_params(spec).total == 2 * 151936 * 2048 + 24 * layer + 2048
    assert count_params(spec).total == 14_315_784_192
    g = lower(spec, Workload(Phase.decode, 8, context=1024))
    gate = next(n for n in g.nodes if n.name == "layers.0.moe.shared_gate")
    assert (gate.op.M, gate.op.N, gate.op.K) == (8, 1, 2048)


def test_llama4_imports_to_the_scout_spec() -> None:
    # Llama4TextConfig's defaults are Llama 4 Scout's (no copy of its config in the
    # reference set): a config naming only its model_type imports to the zoo's Scout,
    # three chunked RoPE layers with an L2 qk-norm to one global NoPE layer
    text = import_config('{"model_type": "llama4_text"}', "llama4-scout.json")
    assert "repeat layers / 4 {" in text and "qk_l2_norm = rope" in text
    spec, zoo = parse_spec(text, "<llama4>"), load_spec(MODELS / "llama4-scout.model")
    assert count_params(spec).total == count_params(zoo).total == 107_769_861_120
    for w in (Workload(Phase.prefill, 2, 512), Workload(Phase.decode, 4, context=1024)):
        assert _nodes(spec, w) == _nodes(zoo, w)
    with pytest.raises(SpecError, match="dense layers between the MoE ones"):
        import_config('{"model_type": "llama4_text", "interleave_moe_layer_step": 2}', "m.json")


def test_mamba2_heads_set_directly_fix_the_inner_width() -> None:
    # transformers' Mamba2Config gives num_heads; here 24 heads of 64 make a 1536-wide
    # SSM on a 1024-wide model whatever expand (2) says (Falcon-H1's d_ssm). One layer:
    # in_proj 1024 · (2·1536 + 2·1·128 + 24) + conv (1536 + 256) · 4 + its bias 1792
    # + dt_bias, A_log, D 3·24 + gated norm 1536 + out_proj 1536 · 1024 + rmsnorm 1024
    m = {"model_type": "mamba2", "hidden_size": 1024, "num_hidden_layers": 2,
         "vocab_size": 1000, "num_heads": 24, "head_dim": 64, "expand": 2, "n_groups": 1,
         "state_size": 128, "tie_word_embeddings": True}  # fmt: skip
    spec = parse_spec(import_config(json.dumps(m), "m.json"), "<mamba2>")
    layer = 1024 * 3352 + 1792 * 4 + 1792 + 72 + 1536 + 1536 * 1024 + 1024
    assert count_params(spec).total == 1000 * 1024 + 2 * layer + 1024
    (mixer,) = {op for op, _ in walk(spec.body) if op.kind == "mamba2"}
    assert (mixer.heads, mixer.d_inner) == (24, 1536)


def test_whisper_imports_to_the_zoo_spec() -> None:
    # openai/whisper-large-v3's values (its model card and config; no copy in the
    # reference set), over WhisperConfig's defaults (Whisper tiny's)
    config = {"model_type": "whisper", "d_model": 1280, "encoder_layers": 32,
              "decoder_layers": 32, "encoder_attention_heads": 20,
              "decoder_attention_heads": 20, "encoder_ffn_dim": 5120, "decoder_ffn_dim": 5120,
              "num_mel_bins": 128, "vocab_size": 51866, "max_source_positions": 1500,
              "max_target_positions": 448, "torch_dtype": "float16"}  # fmt: skip
    text = import_config(json.dumps(config, indent=2), "whisper-large-v3.json")
    assert "stream encoder(length = frames) {" in text and "conv_stem(mels)" in text
    spec, zoo = parse_spec(text, "<whisper>"), load_spec(MODELS / "whisper-large-v3.model")
    assert count_params(spec).total == count_params(zoo).total == 1_543_490_560
    for w in (Workload(Phase.prefill, 2, 16), Workload(Phase.decode, 4, context=100)):
        assert _nodes(spec, w) == _nodes(zoo, w)


def test_composite_and_encoder_decoder_configs_refuse_what_they_cannot_write(tmp_path) -> None:
    llava = json.loads((CONFIGS / "llava-1.5-7b.json").read_text())
    t5 = json.loads((CONFIGS / "t5-base.json").read_text())
    for config, field, message in (
        ({**llava, "vision_feature_layer": [-2, -5]}, "vision_feature_layer",
         "features from several tower layers"),
        ({**llava, "text_config": {**llava["text_config"], "model_type": "qwen2"}},
         "text_config", "a language model outside the llama family"),
        ({**llava, "vision_config": {**llava["vision_config"], "model_type": "siglip"}},
         "vision_config", "a vision tower other than CLIP's"),
        ({**t5, "feed_forward_proj": "gated-relu"}, "feed_forward_proj",
         "this feed-forward kind"),
    ):  # fmt: skip
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps(config, indent=2))
        r = run_cli("import", str(bad))
        assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr
        assert f'"{field}"' in r.stderr  # the caret's line: the field in the file


def test_llava_reads_its_feature_layer_and_selection() -> None:
    # vision_feature_layer -1: all 24 layers feed the projector; `full`: the class
    # token's output joins the prompt too (577 tokens)
    llava = json.loads((CONFIGS / "llava-1.5-7b.json").read_text())
    config = {**llava, "vision_feature_layer": -1, "vision_feature_select_strategy": "full"}
    spec = parse_spec(import_config(json.dumps(config), "llava.json"), "<llava>")
    (stream,) = [n for n in spec.body if n.kind == "stream"]
    assert (stream.length, stream.joins) == (577, 577)
    assert count_params(spec).total == 7_050_828_800 + 12_596_224


def test_the_mtp_module_imports_as_an_auxiliary_stream() -> None:
    text = import_config((CONFIGS / "deepseek-v3.json").read_text(), "deepseek-v3.json")
    assert "stream mtp(auxiliary = true) {" in text
    assert count_params(parse_spec(text, "<ds>")).apart == {"mtp": 13_463_426_304}


# google/gemma-3-27b-it's config.json (its model card; no copy in the reference set):
# what it sets over Gemma3Config's, Gemma3TextConfig's and SiglipVisionConfig's defaults
GEMMA3_27B = {
    "model_type": "gemma3", "mm_tokens_per_image": 256, "torch_dtype": "bfloat16",
    "text_config": {"model_type": "gemma3_text", "head_dim": 128, "hidden_size": 5376,
                    "intermediate_size": 21504, "num_attention_heads": 32,
                    "num_hidden_layers": 62, "num_key_value_heads": 16,
                    "sliding_window": 1024},
    "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 1152,
                      "image_size": 896, "intermediate_size": 4304, "num_attention_heads": 16,
                      "num_hidden_layers": 27, "patch_size": 14, "vision_use_head": False},
}  # fmt: skip
# meta-llama/Llama-4-Scout-17B-16E's: the text model is Llama4TextConfig's defaults
LLAMA4_SCOUT = {
    "model_type": "llama4", "torch_dtype": "bfloat16",
    "text_config": {"model_type": "llama4_text"},
    "vision_config": {"model_type": "llama4_vision_model", "hidden_size": 1408,
                      "image_size": 336, "intermediate_size": 5632, "num_attention_heads": 16,
                      "num_hidden_layers": 34, "patch_size": 14, "pixel_shuffle_ratio": 0.5,
                      "projector_input_dim": 4096, "projector_output_dim": 4096,
                      "vision_output_dim": 4096},
}  # fmt: skip


def test_gemma3_imports_its_siglip_tower_pooled_to_256_tokens() -> None:
    # SigLIP at 896 px: (896/14)² = 4096 patches, conv 3·14·14·1152 + 1152, positions
    # 4096·1152; a layer = 4·(1152² + 1152) + (1152·4304 + 4304) + (4304·1152 + 1152)
    # + 2·2304 = 15,239,504; post-LayerNorm 2304. Projector: RMSNorm 1152 + 1152·5376.
    # tower = 678,528 + 4,718,592 + 27·15,239,504 + 2304 + 1152 + 6,193,152 = 423,060,336
    # With the zoo's text model (27,009,346,304): 27,432,406,640, the count transformers
    # reports for google/gemma-3-27b-it
    text = import_config(json.dumps(GEMMA3_27B, indent=2), "gemma-3-27b-it.json")
    spec, zoo = parse_spec(text, "<gemma3>"), load_spec(MODELS / "gemma3-27b.model")
    tower = 678_528 + 4_718_592 + 27 * 15_239_504 + 2304 + 1152 + 6_193_152
    c = count_params(spec)
    assert c.streams == {"image": tower} and tower == 423_060_336
    assert c.total == count_params(zoo).total + tower == 27_432_406_640
    # 4,096 patches average-pooled 4 × 4 to 256 image tokens, which join the prompt
    n = {x.name: x for x in lower(spec, Workload(Phase.prefill, 1, 100)).nodes}
    assert n["image.layers.0.attn.q_proj"].op.M == 4096
    assert n["image.pool"].op.tensor == (1, 16, 4, 16, 4, 1152)
    assert n["image.linear"].op.M == 256 and n["layers.0.attn.q_proj"].op.M == 356
    # decode: the language model alone, the zoo's, over a cache that holds the image
    assert _nodes(spec, Workload(Phase.decode, 4, context=768)) == _nodes(
        zoo, Workload(Phase.decode, 4, context=1024)
    )


def test_llama4_imports_its_tower_pixel_shuffled_to_144_tokens() -> None:
    # Llama 4's tower at 336 px: 576 patches + a class token; patches unfolded and
    # projected without bias 588·1408, class token 1408, positions 577·1408, LayerNorms
    # before and after 2·2816; a layer = 4·(1408² + 1408) + (1408·5632 + 5632) +
    # (5632·1408 + 1408) + 2·2816 = 23,807,872. The adapter (after the pixel shuffle,
    # 144 tokens 5632 wide) 5632·4096 + 4096², the projector 4096·5120, no biases:
    # tower = 827,904 + 1408 + 812,416 + 5632 + 34·23,807,872 + 23,068,672
    #       + 16,777,216 + 20,971,520 = 871,932,416
    # With the zoo's Scout text model (107,769,861,120): 108,641,793,536, the "109B"
    # total Meta publishes
    spec = parse_spec(import_config(json.dumps(LLAMA4_SCOUT), "scout.json"), "<llama4>")
    zoo = load_spec(MODELS / "llama4-scout.model")
    tower = (827_904 + 1408 + 812_416 + 5632 + 34 * 23_807_872 + 23_068_672 + 16_777_216
             + 20_971_520)  # fmt: skip
    c = count_params(spec)
    assert c.streams == {"image": tower} and tower == 871_932_416
    assert c.total == count_params(zoo).total + tower == 108_641_793_536
    n = {x.name: x for x in lower(spec, Workload(Phase.prefill, 1, 100)).nodes}
    adapter = n["image.linear.0"].op
    assert (adapter.M, adapter.N, adapter.K) == (144, 4096, 5632)
    assert n["layers.0.attn.q_proj"].op.M == 244  # 100 text + 144 image tokens
    assert _nodes(spec, Workload(Phase.decode, 4, context=880)) == _nodes(
        zoo, Workload(Phase.decode, 4, context=1024)
    )
    bad = {**LLAMA4_SCOUT, "vision_config": {**LLAMA4_SCOUT["vision_config"],
                                             "pixel_shuffle_ratio": 0.25}}  # fmt: skip
    with pytest.raises(SpecError, match="an adapter whose input is not the pixel-shuffled"):
        import_config(json.dumps(bad), "m.json")


def test_tower_values_the_importer_cannot_write_are_refused_not_tracebacks() -> None:
    # each a positioned SpecError (exit 2 through the CLI), never a Python exception
    def vision(**values):
        return {**LLAMA4_SCOUT, "vision_config": {**LLAMA4_SCOUT["vision_config"], **values}}

    for config, message in (
        (vision(pixel_shuffle_ratio=0.3), "a pixel shuffle ratio other than 1/n"),
        (vision(pixel_shuffle_ratio=0), "a pixel shuffle ratio other than 1/n"),
        ({**GEMMA3_27B, "mm_tokens_per_image": 100},
         "image tokens that do not pool the patch grid evenly"),
        ({**json.loads((CONFIGS / "llava-1.5-7b.json").read_text()), "vision_feature_layer": 30},
         "a feature layer outside the tower"),
    ):  # fmt: skip
        with pytest.raises(SpecError, match=message):
            import_config(json.dumps(config, indent=2), "m.json")


def test_the_contributing_guides_worked_example_is_the_module_and_imports_as_it_says() -> None:
    # docs/contributing.md shows modelcost/importers/qwen2.py whole, and a Qwen2-0.5B
    # config that imports to the model card's 494,032,768 parameters (the guide derives
    # them by hand: embedding 136,134,656 tied, 24 layers of 14,912,384, a norm of 896)
    guide = (ROOT / "docs" / "contributing.md").read_text()
    example = guide[guide.index("## Worked example: Qwen2") :]
    code = example.split("```python\n", 1)[1].split("```", 1)[0]
    assert code == (ROOT / "modelcost" / "importers" / "qwen2.py").read_text()
    config = example.split("```json\n", 1)[1].split("```", 1)[0]
    spec = parse_spec(import_config(config, "qwen2-0.5b.json"), "<qwen2-0.5b>")
    assert count_params(spec).total == 136_134_656 + 24 * 14_912_384 + 896 == 494_032_768
