"""The ``vllm`` generation engine (:mod:`comprl.llm.vllm_engine`).

The first part runs everywhere: the engine's choice in the config, the error without vLLM, the mapping of our
sampling parameters to vLLM's, and the weight names and folders vLLM is given. The second part needs vLLM and a
CUDA GPU (skipped elsewhere): generation, log-probs against a fresh forward pass at the temperature, stop strings,
prefix caching, and weight sync for a full fine-tune and for LoRA.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json

import pytest
import torch
from safetensors import safe_open
from transformers import AutoModelForCausalLM, LlamaForCausalLM

from comprl.actor.rollout import sampling_params
from comprl.chat import ChatFormat
from comprl.config import PROFILES, ActorConfig, ExperimentConfig, RolloutConfig, make_config
from comprl.llm import ENGINES, HFEngine, SamplingParams, load_model, make_engine
from comprl.llm.choice import ReplyChoices
from comprl.llm.engine import logprob_temperature
from comprl.llm.loading import load_tokenizer, tiny_random_config
from comprl.llm.scoring import token_logprobs
from comprl.llm.vllm_engine import (
    VLLMEngine,
    base_weights,
    finish_reason,
    lora_rank_slot,
    refuse_choices,
    vllm_sampling_kwargs,
    write_checkpoint,
)
from comprl.actor.trainer import ActorTrainer

HAS_VLLM = importlib.util.find_spec("vllm") is not None


# ---------------------------------------------------------------------------------------------- config and factory


def test_engine_defaults_to_hf_and_accepts_only_known_names():
    assert ENGINES == ("hf", "vllm")
    assert RolloutConfig().engine == "hf"
    with pytest.raises(ValueError, match="rollout engine='sglang'; accepted: hf, vllm"):
        make_config("smoke", **{"rollout.engine": "sglang"})


def test_paper_profile_rolls_out_with_vllm_and_the_laptop_profiles_with_hf():
    assert PROFILES["paper"].rollout.engine == "vllm"
    assert PROFILES["cpu"].rollout.engine == "hf" and PROFILES["smoke"].rollout.engine == "hf"
    again = ExperimentConfig.from_dict(json.loads(PROFILES["paper"].to_json()))
    assert again.rollout.engine == "vllm" and again == PROFILES["paper"]


def test_vllm_engine_refuses_constrained_actions_a_cpu_device_and_odd_memory_shares():
    with pytest.raises(ValueError, match="constrained_actions=True is not supported by engine='vllm'"):
        RolloutConfig(engine="vllm", constrained_actions=True)
    with pytest.raises(ValueError, match="runs on a CUDA GPU; device='cpu'"):
        make_config("smoke", **{"rollout.engine": "vllm"})  # the smoke profile runs on the CPU
    for share in (0.0, 1.5):
        with pytest.raises(ValueError, match="vllm_gpu_memory"):
            RolloutConfig(engine="vllm", vllm_gpu_memory=share)


def test_make_engine_builds_the_hf_engine_by_default():
    model, tokenizer = load_model("tiny-random")
    engine = make_engine(make_config("smoke"), model, tokenizer)
    assert isinstance(engine, HFEngine) and engine.model is model


@pytest.mark.skipif(HAS_VLLM, reason="vLLM is installed here")
def test_missing_vllm_names_the_gpu_extra():
    model, tokenizer = load_model("tiny-random")
    with pytest.raises(ImportError, match=r"pip install 'comprl\[gpu\]'"):
        VLLMEngine(model, tokenizer)
    config = make_config("smoke", device="auto", **{"rollout.engine": "vllm"})
    with pytest.raises(ImportError, match=r"comprl\[gpu\]"):
        make_engine(config, model, tokenizer)


# ---------------------------------------------------------------------------------------------- sampling mapping


def test_sampling_kwargs_are_the_trainers_and_otherwise_neutral():
    params = SamplingParams(max_new_tokens=7, temperature=0.7, stop=("</answer>",))
    assert vllm_sampling_kwargs(params, eos_token_id=2) == {
        "n": 1,
        "max_tokens": 7,
        "temperature": 0.7,
        "top_p": 1.0,
        "top_k": -1,
        "min_p": 0.0,
        "repetition_penalty": 1.0,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "logit_bias": None,
        "allowed_token_ids": None,
        "bad_words": None,
        "min_tokens": 0,
        "ignore_eos": False,
        "seed": None,
        "stop": ["</answer>"],
        "stop_token_ids": [2],
        "include_stop_str_in_output": True,
        "detokenize": True,
        "skip_special_tokens": True,
        "logprobs": 0,
    }


def test_sampling_kwargs_keep_greedy_and_refuse_what_would_change_the_distribution_unseen():
    greedy = vllm_sampling_kwargs(SamplingParams(temperature=0.0), eos_token_id=None)
    assert greedy["temperature"] == 0.0 and greedy["stop"] == [] and greedy["stop_token_ids"] == []
    with pytest.raises(ValueError, match="top_p=1"):
        vllm_sampling_kwargs(SamplingParams(top_p=0.9), eos_token_id=2)
    with pytest.raises(ValueError, match="temperature=0.005"):
        vllm_sampling_kwargs(SamplingParams(temperature=0.005), eos_token_id=2)


def test_finish_reasons_map_to_eos_stop_and_length():
    assert finish_reason("length", None) == "length"
    assert finish_reason("stop", "</answer>") == "stop"  # a stop string
    assert finish_reason("stop", None) == "eos"  # the EOS token
    assert finish_reason("stop", 2) == "eos"  # a stop token id (the engine passes EOS as one)
    with pytest.raises(RuntimeError, match="abort"):
        finish_reason("abort", None)


def test_constrained_choice_is_refused_with_the_field_and_the_engine_to_use():
    refuse_choices(None)
    refuse_choices([None, None])
    with pytest.raises(ValueError, match=r"rollout.constrained_actions.*rollout.engine='hf'"):
        refuse_choices([None, ReplyChoices.build([[5, 6], [7]])])


# ---------------------------------------------------------------------------------------------- what vLLM is given


def test_weights_of_a_lora_model_are_given_under_the_base_models_names_without_copies():
    model, tokenizer = load_model("tiny-random")
    plain = dict(model.named_parameters())
    assert [name for name, _ in base_weights(model)] == list(plain)
    trainer = ActorTrainer(model, tokenizer.pad_token_id, ActorConfig(lora_rank=8, lora_alpha=16))
    weights = dict(base_weights(trainer.model))
    assert set(weights) == set(plain)  # no base_model.model., no .base_layer, no lora_A/lora_B
    assert all(weights[name].data_ptr() == plain[name].data_ptr() for name in plain)


def test_lora_checkpoint_folder_loads_as_the_base_model_and_adapters_save_alone(tmp_path):
    model, tokenizer = load_model("tiny-random")
    trainer = ActorTrainer(model, tokenizer.pad_token_id, ActorConfig(lora_rank=8, lora_alpha=16))
    with torch.no_grad():  # adapters that change the output, as after training
        for name, param in trainer.model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.05)
    folder = write_checkpoint(tmp_path / "base", trainer.model, tokenizer, with_weights=True)
    assert json.loads((folder / "config.json").read_text())["architectures"] == ["LlamaForCausalLM"]
    assert not (folder / "generation_config.json").exists()  # vLLM is told to ignore it anyway
    ids = torch.tensor([[1, 5, 9, 200, 3000, 42]])
    with torch.no_grad(), trainer.model.disable_adapter():
        expected = trainer.model(input_ids=ids).logits
    reloaded = AutoModelForCausalLM.from_pretrained(folder)
    with torch.no_grad():
        assert torch.equal(reloaded(input_ids=ids).logits, expected)

    trainer.model.save_pretrained(tmp_path / "adapter")  # what VLLMEngine.sync_weights does with LoRA
    adapter = json.loads((tmp_path / "adapter" / "adapter_config.json").read_text())
    assert adapter["r"] == 8 and adapter["lora_alpha"] == 16
    with safe_open(str(tmp_path / "adapter" / "adapter_model.safetensors"), "pt") as saved:
        keys = list(saved.keys())
    assert keys and all(".lora_A." in key or ".lora_B." in key for key in keys)
    assert lora_rank_slot(8) == 8 and lora_rank_slot(12) == 16 and lora_rank_slot(300) == 320


# ---------------------------------------------------------------------------------------------- on a GPU with vLLM

MAX_TOKEN_ERROR = 0.15
"""Largest |vLLM - HF| per token log-prob we accept: both run in bfloat16, with different kernels, whose rounding
stays below it, while scoring at a wrong temperature (1 instead of 0.7) or after a weight change goes far above."""
MEAN_TOKEN_ERROR = 0.04
"""Largest mean |vLLM - HF| over a batch's tokens, with the same margin over bfloat16 rounding."""
TEMPERATURE = 0.7


def _gpu() -> None:
    pytest.importorskip("vllm")
    if not torch.cuda.is_available():
        pytest.skip("the vllm engine needs a CUDA GPU")


def _gpu_model() -> tuple[LlamaForCausalLM, object]:
    """tiny-random's architecture and tokenizer (SmolLM2's), 256 wide so that attention heads are 64 wide (a size
    every vLLM attention backend takes; tiny-random's are 16), in bfloat16 on the GPU, with the final norm's
    weight at 3 so that the next-token distribution is far from uniform and the temperature matters."""
    tokenizer = load_tokenizer("tiny-random")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = LlamaForCausalLM(tiny_random_config(len(tokenizer), width=256))
    with torch.no_grad():
        model.model.norm.weight.fill_(3.0)
    return model.to(torch.bfloat16).to("cuda").eval(), tokenizer


def _prompts(tokenizer) -> list[list[int]]:
    chat = ChatFormat.from_tokenizer(tokenizer)
    return [
        chat.start("You are in a dungeon.", "Go north to the stairs."),
        chat.start("You are in a dungeon.", "You see a key to the east and a door to the west. What now?"),
        chat.start("You shop for a user.", "Find a red cotton shirt under 20 dollars."),
    ]


def _forward_logprobs(model, prompt: list[int], completion, temperature: float) -> torch.Tensor:
    """The trainer's log-probs of ``completion``'s tokens after ``prompt`` (:func:`token_logprobs`)."""
    ids = torch.tensor([list(prompt) + completion.token_ids], device="cuda")
    mask = torch.zeros_like(ids)
    mask[0, len(prompt) :] = 1
    with torch.no_grad():
        scored = token_logprobs(model, ids, torch.ones_like(ids), mask, logprob_temperature(temperature))
    return scored[0, len(prompt) :].float().cpu()


def _errors(model, prompts, completions, temperature: float) -> torch.Tensor:
    """|engine - forward pass| of every generated token's log-prob."""
    return torch.cat(
        [
            (torch.tensor(c.logprobs) - _forward_logprobs(model, p, c, temperature)).abs()
            for p, c in zip(prompts, completions)
        ]
    )


def _assert_close(errors: torch.Tensor) -> None:
    assert errors.numel() > 0
    assert errors.max() <= MAX_TOKEN_ERROR and errors.mean() <= MEAN_TOKEN_ERROR, (errors.max(), errors.mean())


@pytest.fixture(scope="class")
def served():
    """A full fine-tune's model and its vllm engine, shut down after the class that uses them (so that the LoRA
    test's engine does not share the GPU with it)."""
    _gpu()
    model, tokenizer = _gpu_model()
    engine = VLLMEngine(model, tokenizer, gpu_memory_utilization=0.25, seed=0)
    yield model, tokenizer, engine
    engine.close()


class TestFullFineTune:
    def test_logprobs_equal_a_fresh_forward_pass_at_the_temperature(self, served):
        model, tokenizer, engine = served
        prompts = _prompts(tokenizer)
        completions = engine.generate(prompts, SamplingParams(max_new_tokens=16, temperature=TEMPERATURE))
        assert len(completions) == len(prompts)
        for c in completions:
            assert len(c.token_ids) == len(c.logprobs) > 0 and c.finish_reason in ("eos", "length")
            assert c.text == tokenizer.decode(c.token_ids, skip_special_tokens=True)
        _assert_close(_errors(model, prompts, completions, TEMPERATURE))
        # the tolerance tells temperatures apart: the same tokens at temperature 1 are far off
        assert _errors(model, prompts, completions, 1.0).mean() > 5 * MEAN_TOKEN_ERROR

    def test_stop_strings_end_replies_and_are_kept(self, served):
        model, tokenizer, engine = served
        prompt = _prompts(tokenizer)[:1]
        free = engine.generate(prompt, SamplingParams(max_new_tokens=12, temperature=0.0))[0]
        assert free.finish_reason == "length" or free.token_ids[-1] == tokenizer.eos_token_id
        texts = [
            tokenizer.decode(free.token_ids[:n], skip_special_tokens=True) for n in range(1, len(free.token_ids) + 1)
        ]
        ends = [n for n, text in enumerate(texts, 1) if len(text.strip()) >= 2 and n >= 2]
        if not ends:
            pytest.skip("the random model wrote no text to cut at")
        stop = texts[ends[0] - 1].rstrip()[-2:]
        engine.clear_cache()  # both replies from a full prefill of the prompt
        cut = engine.generate(prompt, SamplingParams(max_new_tokens=12, temperature=0.0, stop=(stop,)))[0]
        assert cut.finish_reason == "stop" and stop in cut.text
        assert cut.token_ids == free.token_ids[: len(cut.token_ids)]  # greedy: the same reply, cut short
        assert stop not in tokenizer.decode(cut.token_ids[:-1], skip_special_tokens=True)  # cut at the first one
        _assert_close(_errors(model, prompt, [cut], 0.0))  # greedy replies are scored at temperature 1

    def test_next_turn_reuses_the_prefix_cache_and_choices_are_refused(self, served):
        model, tokenizer, engine = served
        chat = ChatFormat.from_tokenizer(tokenizer)
        params = SamplingParams(max_new_tokens=8, temperature=TEMPERATURE)
        first = _prompts(tokenizer)[1]
        reply = engine.generate([first], params, sessions=["episode"])[0]
        second = first + reply.token_ids + chat.next_turn(reply.token_ids, "The door is locked.")
        before = engine.stats["reused_prompt_tokens"]
        again = engine.generate([second], params, sessions=["episode"])
        engine.release(["episode"])
        assert engine.stats["reused_prompt_tokens"] - before >= 16  # at least one full block of the first turn
        _assert_close(_errors(model, [second], again, TEMPERATURE))
        with pytest.raises(ValueError, match="constrained_actions"):
            engine.generate([first], params, choices=[ReplyChoices.build([[5, 6]])])

    def test_after_sync_weights_logprobs_follow_the_new_weights(self, served):
        model, tokenizer, engine = served
        prompts = _prompts(tokenizer)
        params = SamplingParams(max_new_tokens=16, temperature=TEMPERATURE)
        saved = {name: p.detach().clone() for name, p in model.named_parameters()}
        try:
            with torch.no_grad(), torch.random.fork_rng(devices=[0]):
                torch.manual_seed(1)
                for p in model.parameters():  # every weight moves, so every name must reach vLLM
                    p.add_(0.02 * torch.randn_like(p))
            stale = engine.generate(prompts, params)  # not synced yet: still the old weights
            assert _errors(model, prompts, stale, TEMPERATURE).mean() > 5 * MEAN_TOKEN_ERROR
            engine.sync_weights()
            fresh = engine.generate(prompts, params)
            _assert_close(_errors(model, prompts, fresh, TEMPERATURE))
        finally:
            with torch.no_grad():
                for name, p in model.named_parameters():
                    p.copy_(saved[name])
            engine.sync_weights()


def test_lora_sync_weights_serves_the_new_adapters():
    _gpu()
    model, tokenizer = _gpu_model()
    trainer = ActorTrainer(model, tokenizer.pad_token_id, ActorConfig(lora_rank=8, lora_alpha=16))
    engine = VLLMEngine(trainer.model, tokenizer, gpu_memory_utilization=0.25, seed=0)
    try:
        prompts = _prompts(tokenizer)
        params = SamplingParams(max_new_tokens=16, temperature=TEMPERATURE)
        _assert_close(_errors(trainer.model, prompts, engine.generate(prompts, params), TEMPERATURE))
        with torch.no_grad(), torch.random.fork_rng(devices=[0]):
            torch.manual_seed(1)
            for name, param in trainer.model.named_parameters():
                if "lora_B" in name:  # zero at start; as after some training
                    param.normal_(0, 0.05)
        engine.sync_weights()
        fresh = engine.generate(prompts, params)
        _assert_close(_errors(trainer.model, prompts, fresh, TEMPERATURE))
        with trainer.model.disable_adapter():  # and the adapters do matter for these tokens
            assert _errors(trainer.model, prompts, fresh, TEMPERATURE).mean() > 5 * MEAN_TOKEN_ERROR
    finally:
        engine.close()


def test_rollout_config_sampling_reaches_vllm_unchanged():
    """The actor's rollouts and evaluations sample with ``sampling_params(RolloutConfig)``: its fields all map."""
    rollout = dataclasses.replace(PROFILES["paper"].rollout, temperature=1.0)
    kwargs = vllm_sampling_kwargs(sampling_params(rollout), eos_token_id=151645)
    assert (kwargs["max_tokens"], kwargs["temperature"], kwargs["stop"]) == (rollout.max_new_tokens, 1.0, ["</answer>"])
