"""Trainer backends: bfloat16 autocast over fp32 weights, gradient checkpointing under it, and the unsloth option.

Autocast runs on CPU here (and on CUDA where a GPU exists); unsloth is only checked for its errors and its call
unless the package and a GPU are both present, where one real update runs.
"""

from __future__ import annotations

import functools
import random
import sys
import types
import warnings

import numpy as np
import pytest
import torch
from conftest import pack

from comprl.config import ActorConfig, ExperimentConfig, ExtractorConfig, OptimConfig, make_config
from comprl.llm import HFEngine, SamplingParams, load_model, token_logprobs
from comprl.objectives import grpo_policy_loss
from comprl.policy_gradient import PackedSequence, PolicyGradientTrainer, pad_batch

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
RATIO_TOLERANCE = 1e-2
"""Largest |ratio - 1| allowed on-policy between behaviour log-probs (engine, the weights' own dtype) and the
trainer's under bfloat16 autocast, on the tiny model: bfloat16 rounding of its small logits stays well below it (a
real model's rounding is larger; README, "Trainer backends")."""


class Trainer(PolicyGradientTrainer):
    """A PolicyGradientTrainer with the GRPO loss, scoring every sequence at temperature 1 (the samples'
    temperature)."""

    def __init__(self, model, pad_token_id: int, config: OptimConfig) -> None:
        super().__init__(
            model, pad_token_id, config, functools.partial(grpo_policy_loss, clip_eps=0.2, aggregation="token-mean")
        )

    def logprob_temperature(self, sequence) -> float:
        return 1.0


def _on_policy_batch(model, tokenizer, n: int = 4, adapter_dtype: str = "model"):
    """Sequences sampled from ``model`` at temperature 1, with their behaviour log-probs, and +-1 advantages."""
    prompts = [tokenizer.encode(f"Episode {i}: the agent walks north and finds") for i in range(n)]
    torch.manual_seed(0)
    engine = HFEngine(model, tokenizer, adapter_dtype=adapter_dtype)
    completions = engine.generate(prompts, SamplingParams(max_new_tokens=8, temperature=1.0))
    return pack(prompts, completions), torch.tensor([1.0, -1.0] * (n // 2))


def _checkpointing(model) -> bool:
    """Whether transformers' activation checkpointing is on (the attribute's name since transformers 5.x, or the
    old one)."""
    if hasattr(model, "is_activation_checkpointing"):
        return model.is_activation_checkpointing
    return model.is_gradient_checkpointing


def _trainable(trainer: PolicyGradientTrainer) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in trainer.model.named_parameters() if p.requires_grad}


# --- autocast ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
def test_autocast_scores_on_policy_samples_with_ratio_one_within_bf16_rounding(device):
    model, tokenizer = load_model("tiny-random", seed=1, device=device)
    trainer = Trainer(model, tokenizer.pad_token_id, OptimConfig(lora_rank=4, autocast="bfloat16", learning_rate=1e-3))
    sequences, advantages = _on_policy_batch(trainer.model, tokenizer)  # sampled in float32, no autocast
    batch = {k: v.to(device) for k, v in pad_batch(sequences, tokenizer.pad_token_id).items()}
    mask = batch["action_mask"].bool()
    with torch.no_grad():
        args = (trainer.model, batch["input_ids"], batch["attention_mask"], batch["action_mask"])
        mixed = token_logprobs(*args, autocast=torch.bfloat16)
        plain = token_logprobs(*args)
    assert mixed.dtype == torch.float32
    ratio = (mixed - batch["old_logprobs"])[mask].exp()
    assert (ratio - 1).abs().max() < RATIO_TOLERANCE
    assert not torch.equal(mixed[mask], plain[mask])  # the forward did run in bfloat16
    torch.testing.assert_close(plain[mask], batch["old_logprobs"][mask], atol=1e-4, rtol=1e-4)
    metrics = trainer.update(sequences, advantages)
    assert abs(metrics["ratio_mean"] - 1) < RATIO_TOLERANCE and metrics["clip_fraction"] == 0.0


def test_fp32_lora_adapters_on_a_bf16_base_multiply_in_bf16_under_autocast():
    model, tokenizer = load_model("tiny-random", seed=1, dtype=torch.bfloat16)
    trainer = Trainer(model, tokenizer.pad_token_id, OptimConfig(lora_rank=4, autocast="bfloat16", learning_rate=1e-3))
    lora_a = next(m for name, m in trainer.model.named_modules() if name.endswith("q_proj.lora_A.default"))
    assert lora_a.weight.dtype == torch.float32
    seen: list[torch.dtype] = []
    lora_a.register_forward_hook(lambda module, inputs, output: seen.append(output.dtype))
    # the engine, without autocast and with the adapters in peft's float32 (generation_adapter_dtype="float32")
    sequences, advantages = _on_policy_batch(trainer.model, tokenizer, adapter_dtype="float32")
    trainer.update(sequences, advantages)  # the trainer: autocast
    assert seen[0] == torch.float32  # peft runs fp32 adapters in fp32 on its own
    assert seen[-1] == torch.bfloat16


@pytest.mark.parametrize(
    "dtype, lora_rank",
    [(torch.float32, 4), (torch.bfloat16, 4), (torch.float32, 0), (torch.bfloat16, 0)],
    ids=["lora-fp32-base", "lora-bf16-base", "full-fp32", "full-bf16"],
)
def test_an_update_under_autocast_changes_the_weights_and_keeps_fp32_masters(dtype, lora_rank):
    model, tokenizer = load_model("tiny-random", seed=1, dtype=dtype)
    config = OptimConfig(lora_rank=lora_rank, autocast="bfloat16", learning_rate=1e-3, micro_batch_size=4)
    trainer = Trainer(model, tokenizer.pad_token_id, config)
    before = _trainable(trainer)
    sequences, advantages = _on_policy_batch(trainer.model, tokenizer)
    metrics = trainer.update(sequences, advantages)
    assert metrics["trained_sequences"] == 4 and metrics["grad_norm"] > 0
    after = _trainable(trainer)
    assert any(not torch.equal(before[k], after[k]) for k in before)
    assert all(master.dtype == torch.float32 and master.grad.dtype == torch.float32 for master in trainer._masters)
    assert all(
        s.dtype == torch.float32 for state in trainer.optimizer.state.values() for s in state.values() if s.dim()
    )
    params = [p for p in trainer.model.parameters() if p.requires_grad]
    assert all(p.dtype == (torch.float32 if lora_rank else dtype) for p in params)  # weights keep their dtype
    for param, master in trainer._low_precision:
        assert torch.equal(param, master.to(param.dtype))


@pytest.mark.parametrize("lora_rank", [4, 0], ids=["lora", "full"])
def test_gradient_checkpointing_under_autocast_gives_the_gradients_of_a_plain_backward(lora_rank):
    losses, gradients = [], []
    for checkpointing in (False, True):
        model, tokenizer = load_model("tiny-random", seed=1)
        torch.manual_seed(0)  # the same LoRA initialisation for both
        config = OptimConfig(
            lora_rank=lora_rank, autocast="bfloat16", gradient_checkpointing=checkpointing, micro_batch_size=2
        )
        trainer = Trainer(model, tokenizer.pad_token_id, config)
        assert _checkpointing(trainer.model) == checkpointing
        sequences, advantages = _on_policy_batch(trainer.model, tokenizer)
        trainer.model.train()
        trainer.model.zero_grad(set_to_none=True)
        losses.append(trainer._accumulate(sequences, advantages, backward=True)["loss"])
        gradients.append({n: p.grad.clone() for n, p in trainer.model.named_parameters() if p.requires_grad})
    assert losses[0] == pytest.approx(losses[1], abs=1e-6)
    assert gradients[0].keys() == gradients[1].keys()
    for name in gradients[0]:  # the recomputation runs under the same autocast, so it matches bit for bit or nearly
        torch.testing.assert_close(gradients[1][name], gradients[0][name], atol=1e-5, rtol=1e-3)


def test_a_shared_model_trainer_autocasts_as_the_trainer_that_set_it_up():
    model, tokenizer = load_model("tiny-random", seed=1)
    owner = Trainer(model, tokenizer.pad_token_id, OptimConfig(lora_rank=4, autocast="bfloat16"))
    other = PolicyGradientTrainer(owner.model, tokenizer.pad_token_id, OptimConfig(), owner.loss_fn, weights_of=owner)
    assert owner.autocast is other.autocast is torch.bfloat16


# --- configuration ---------------------------------------------------------------------------------------------------


def test_bad_autocast_and_backend_are_rejected_naming_the_field():
    with pytest.raises(ValueError, match=r"autocast='float16'.*bfloat16"):
        OptimConfig(autocast="float16")
    with pytest.raises(ValueError, match=r"backend='deepspeed'.*hf, unsloth"):
        ActorConfig(backend="deepspeed")
    with pytest.raises(ValueError, match=r"backend='unsloth'.*lora_rank > 0"):
        ExtractorConfig(backend="unsloth")
    assert ActorConfig(backend="unsloth", lora_rank=8).backend == "unsloth"
    with pytest.raises(ValueError, match=r"backend='bogus'; accepted: hf, unsloth"):
        load_model("tiny-random", backend="bogus")


def test_cpu_and_smoke_profiles_keep_todays_precision_and_backend():
    for profile in ("smoke", "cpu"):
        config = make_config(profile)
        for part in (config.actor, config.extractor):
            assert part.autocast is None and part.backend == "hf"


def test_the_paper_profile_computes_in_bf16_with_checkpointing_like_the_official_code():
    config = make_config("paper")
    assert config.dtype == "bfloat16"
    for part in (config.actor, config.extractor):
        assert part.autocast == "bfloat16" and part.gradient_checkpointing and part.backend == "hf"


def test_a_config_recorded_before_these_fields_loads_with_todays_behaviour():
    recorded = make_config("cpu").to_dict()
    for part in ("actor", "extractor"):
        del recorded[part]["autocast"], recorded[part]["backend"]
    config = ExperimentConfig.from_dict(recorded)
    assert config == make_config("cpu")
    assert ExperimentConfig.from_dict(make_config("paper").to_dict()) == make_config("paper")


# --- unsloth -------------------------------------------------------------------------------------------------------

needs_no_unsloth = pytest.mark.skipif(
    "unsloth" in sys.modules or __import__("importlib").util.find_spec("unsloth") is not None,
    reason="unsloth is installed here",
)


@needs_no_unsloth
def test_unsloth_backend_without_the_package_names_the_gpu_extra():
    with pytest.raises(ImportError, match=r"pip install 'comprl\[gpu\]'"):
        load_model("tiny-random", backend="unsloth", device="cuda")
    model, tokenizer = load_model("tiny-random", seed=1)
    with pytest.raises(ImportError, match=r"comprl\[gpu\]"):
        Trainer(model, tokenizer.pad_token_id, OptimConfig(backend="unsloth", lora_rank=4))


def _fake_unsloth(monkeypatch, calls: list):
    """An ``unsloth`` module whose FastLanguageModel loads with transformers and adds adapters with peft, records
    its calls and, like the real one, reseeds the global generators in get_peft_model."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer, set_seed

    class FastLanguageModel:
        @staticmethod
        def from_pretrained(model_name, **kwargs):
            calls.append(("from_pretrained", model_name, kwargs))
            model = AutoModelForCausalLM.from_pretrained(model_name, dtype=kwargs["dtype"])
            model.max_seq_length = kwargs["max_seq_length"]
            return model, AutoTokenizer.from_pretrained(model_name)

        @staticmethod
        def get_peft_model(model, **kwargs):
            calls.append(("get_peft_model", kwargs))
            set_seed(kwargs["random_state"])
            lora = LoraConfig(r=kwargs["r"], lora_alpha=kwargs["lora_alpha"], target_modules=kwargs["target_modules"])
            with warnings.catch_warnings():  # peft reads an attribute transformers has deprecated
                warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
                return get_peft_model(model, lora)

    monkeypatch.setitem(sys.modules, "unsloth", types.SimpleNamespace(FastLanguageModel=FastLanguageModel))
    return FastLanguageModel


def test_unsloth_backend_without_cuda_says_so(monkeypatch):
    _fake_unsloth(monkeypatch, [])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match=r"CUDA GPU.*backend='hf'"):
        load_model("tiny-random", backend="unsloth", device="cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    with pytest.raises(RuntimeError, match=r"device='cpu'"):
        load_model("tiny-random", backend="unsloth", device="cpu")


def test_unsloth_backend_calls_fast_language_model_and_leaves_the_run_generators_alone(monkeypatch):
    calls: list = []
    fake = _fake_unsloth(monkeypatch, calls)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    model, tokenizer = load_model("tiny-random", seed=1, backend="unsloth", device="cuda")  # the fake stays on CPU
    (_, source, load_kwargs), = calls
    assert source.endswith("tiny-random-seed1") and load_kwargs["load_in_4bit"] is False
    assert load_kwargs["max_seq_length"] == 8192 and tokenizer.pad_token_id is not None
    plain, _ = load_model("tiny-random", seed=1)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), plain.state_dict().values()))

    monkeypatch.setattr("comprl.policy_gradient.unsloth_fast_language_model", lambda device: fake)
    with pytest.raises(ValueError, match=r"load_model\(name, backend='unsloth'\)"):
        Trainer(plain, tokenizer.pad_token_id, OptimConfig(backend="unsloth", lora_rank=4))
    random.seed(5), np.random.seed(5), torch.manual_seed(5)
    config = OptimConfig(
        backend="unsloth",
        lora_rank=4,
        lora_alpha=8,
        gradient_checkpointing=True,
        autocast="bfloat16",
        learning_rate=1e-3,
    )
    trainer = Trainer(model, tokenizer.pad_token_id, config)
    draws = random.random(), np.random.rand(), torch.rand(())
    random.seed(5), np.random.seed(5), torch.manual_seed(5)
    torch.randint(2**31 - 1, ())  # the one torch draw that picked unsloth's random_state
    assert draws == (random.random(), np.random.rand(), torch.rand(()))
    (_, peft_kwargs), = calls[1:]
    assert peft_kwargs["r"] == 4 and peft_kwargs["lora_alpha"] == 8 and peft_kwargs["lora_dropout"] == 0.0
    assert peft_kwargs["use_gradient_checkpointing"] == "unsloth" and peft_kwargs["bias"] == "none"
    assert set(peft_kwargs["target_modules"]) == {
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
    }
    assert not _checkpointing(trainer.model)  # unsloth checkpoints on its own, not through transformers
    before = _trainable(trainer)
    assert before and all("lora_" in name for name in before)
    trainer.update(*_on_policy_batch(trainer.model, tokenizer))
    assert any(not torch.equal(before[k], v) for k, v in _trainable(trainer).items())


def test_a_model_that_returns_every_position_is_scored_at_the_kept_ones():
    """unsloth's forward ignores a tensor ``logits_to_keep`` and returns logits for every position."""
    model, tokenizer = load_model("tiny-random", seed=1)
    sequences, _ = _on_policy_batch(model, tokenizer, n=2)
    batch = pad_batch(sequences, tokenizer.pad_token_id)
    forward = model.forward
    every_position = lambda *args, logits_to_keep=0, **kwargs: forward(*args, logits_to_keep=0, **kwargs)  # noqa: E731
    with torch.no_grad():
        expected = token_logprobs(model, batch["input_ids"], batch["attention_mask"], batch["action_mask"])
        model.forward = every_position
        got = token_logprobs(model, batch["input_ids"], batch["attention_mask"], batch["action_mask"])
    torch.testing.assert_close(got, expected)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="unsloth trains on a CUDA GPU")
def test_an_unsloth_update_changes_the_lora_weights():
    pytest.importorskip("unsloth")
    model, tokenizer = load_model("tiny-random", seed=1, dtype=torch.bfloat16, device="cuda", backend="unsloth")
    config = OptimConfig(
        backend="unsloth", lora_rank=4, gradient_checkpointing=True, autocast="bfloat16", learning_rate=1e-3
    )
    trainer = Trainer(model, tokenizer.pad_token_id, config)
    # behaviour log-probs from the trainer's own forward (unsloth's generate is its own business)
    ids = torch.randint(100, 1000, (4, 24))
    sequences = []
    with torch.no_grad():
        mask = torch.zeros(4, 24)
        mask[:, 16:] = 1
        old = token_logprobs(
            trainer.model, ids.cuda(), torch.ones_like(ids).cuda(), mask.cuda(), autocast=torch.bfloat16
        ).cpu()
    for row in range(4):
        sequence = PackedSequence()
        sequence.extend(ids[row, :16].tolist())
        sequence.extend(ids[row, 16:].tolist(), old[row, 16:].tolist())
        sequences.append(sequence)
    before = _trainable(trainer)
    metrics = trainer.update(sequences, torch.tensor([1.0, -1.0, 1.0, -1.0]))
    assert abs(metrics["ratio_mean"] - 1) < 0.05
    assert any(not torch.equal(before[k], v) for k, v in _trainable(trainer).items())
    assert all(master.dtype == torch.float32 for master in trainer._masters)
