"""The HFEngine prefix KV cache: multi-turn generation with ``sessions=`` equals generation without it."""

from __future__ import annotations

import os

import pytest
import torch
from conftest import pack

from comprl.chat import ChatFormat
from comprl.llm import HFEngine, SamplingParams, load_model

# transformers 5.24 renamed generate()'s past_key_values to cache and warns at every call given the old name
pytestmark = pytest.mark.filterwarnings("error:`past_key_values`:FutureWarning")


USERS = ["Go north.", "The stairs are far to the southeast of the room you are standing in now, past a fountain.", "Hi"]


LONG_SYSTEM = (
    "You play a text game on a grid. Each turn you read what you see and answer with one move inside answer tags: "
    "north, south, east or west. Reach the stairs down to win; walls and dark squares block your way."
)
"""A system prompt longer than SHARED_PREFIX_MIN tokens: prompts that start with it share a prefix."""


def _first_prompts(tokenizer, system: str = "You play a game.") -> list[list[int]]:
    fmt = ChatFormat.from_tokenizer(tokenizer)
    prompts = [fmt.start(system, text) for text in USERS]
    assert len({len(p) for p in prompts}) == 3
    return prompts


def _observation(turn: int, session: int) -> str:
    """Observations of different lengths per session and turn, so cached and uncached lengths vary by row."""
    return " ".join(["You see a wall to the east."] * (1 + (turn + 2 * session) % 4)) + f" Turn {turn}."


def _play(
    engine: HFEngine, params: SamplingParams, turns: int, use_sessions: bool, seed: int = 0, prompts=None
):
    """Multi-turn lockstep play like comprl.actor.rollout: prompt + reply + next observation each turn."""
    fmt = ChatFormat.from_tokenizer(engine.tokenizer)
    prompts = _first_prompts(engine.tokenizer) if prompts is None else prompts
    sessions = [f"episode-{i}" for i in range(len(prompts))] if use_sessions else None
    history = []
    torch.manual_seed(seed)
    for turn in range(turns):
        completions = engine.generate(prompts, params, sessions=sessions)
        history.append((prompts, completions))
        prompts = [
            p + c.token_ids + fmt.next_turn(c.token_ids, _observation(turn, i))
            for i, (p, c) in enumerate(zip(prompts, completions))
        ]
    return history


def _assert_same(history_a, history_b, atol=1e-4):
    for (prompts_a, out_a), (prompts_b, out_b) in zip(history_a, history_b, strict=True):
        assert prompts_a == prompts_b
        for a, b in zip(out_a, out_b, strict=True):
            assert a.token_ids == b.token_ids and a.finish_reason == b.finish_reason
            torch.testing.assert_close(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=atol, rtol=0)


def _expected_reuse(history) -> int:
    """Prompt tokens whose keys/values should come from the cache: a session keeps its prompt and reply minus the
    reply's last token (capped by the generation steps of its batch); every row recomputes its last ``fresh``
    tokens, where ``fresh`` is the longest uncached suffix in the batch."""
    total, kept = 0, None
    for prompts, completions in history:
        cached = [0] * len(prompts) if kept is None else [min(k, len(p) - 1) for k, p in zip(kept, prompts)]
        fresh = max(len(p) - c for p, c in zip(prompts, cached))
        total += sum(max(len(p) - fresh, 0) for p in prompts)
        steps = max(len(c.token_ids) for c in completions)
        kept = [len(p) + min(len(c.token_ids), steps - 1) for p, c in zip(prompts, completions)]
    return total


def _stop_for_first_prompt(engine: HFEngine) -> str:
    """A stop string that greedy decoding of the first prompt hits at token 4 or 5 (exercises early-ending rows)."""
    free = engine.generate(_first_prompts(engine.tokenizer)[:1], SamplingParams(max_new_tokens=10, temperature=0))[0]
    stop = engine.tokenizer.decode(free.token_ids[3:5])
    assert stop.strip()
    return stop


def test_multi_turn_greedy_with_cache_equals_without(sharp):
    model, tokenizer = sharp
    plain, cached = HFEngine(model, tokenizer), HFEngine(model, tokenizer)
    params = SamplingParams(max_new_tokens=12, temperature=0, stop=(_stop_for_first_prompt(plain),))
    expected = _play(plain, params, turns=4, use_sessions=False)
    got = _play(cached, params, turns=4, use_sessions=True)
    _assert_same(expected, got)
    assert any(c.finish_reason == "stop" for _, out in got for c in out)  # a row that ended before the others
    assert cached.stats["reused_prompt_tokens"] == _expected_reuse(got)  # the cache was used as designed
    assert cached.cached_sessions == {"episode-0", "episode-1", "episode-2"}
    # What is kept for a session is its last prompt and reply (minus the reply's last token).
    last_prompts, last_out = got[-1]
    assert cached.cached_tokens == sum(len(p) + len(c.token_ids) - 1 for p, c in zip(last_prompts, last_out))


def test_multi_turn_sampling_with_cache_matches_fresh_forward_pass(sharp, assert_logprobs_match_fresh_pass):
    model, tokenizer = sharp
    plain, cached = HFEngine(model, tokenizer), HFEngine(model, tokenizer)
    params = SamplingParams(max_new_tokens=10, temperature=0.7)
    expected = _play(plain, params, turns=3, use_sessions=False, seed=5)
    got = _play(cached, params, turns=3, use_sessions=True, seed=5)
    _assert_same(expected, got)  # same seed, same distributions: same samples
    sequences = [s for prompts, completions in got for s in pack(prompts, completions)]
    assert_logprobs_match_fresh_pass(model, tokenizer.pad_token_id, sequences, 0.7)


def test_prompt_that_does_not_extend_the_kept_ids_is_prefilled_in_full(sharp):
    model, tokenizer = sharp
    plain, cached = HFEngine(model, tokenizer), HFEngine(model, tokenizer)
    params = SamplingParams(max_new_tokens=6, temperature=0)
    prompts = _first_prompts(tokenizer)
    sessions = ["a", "b", "c"]
    first = cached.generate(prompts, params, sessions=sessions)
    extended = [p + c.token_ids + [tokenizer.eos_token_id] for p, c in zip(prompts, first)]
    changed = list(extended[0])
    changed[2] = (changed[2] + 1) % len(tokenizer)  # diverges from what "a" keeps
    cases = [
        changed,  # diverges early: full prefill
        prompts[1][:-3],  # shorter than what "b" keeps: full prefill
        extended[2][: len(prompts[2]) + len(first[2].token_ids) - 1],  # exactly the kept ids: reuse all but one
    ]
    before = cached.stats["reused_prompt_tokens"]
    got = cached.generate(cases, params, sessions=sessions)
    # Only the third row reused its cache; the batch recomputes the longest uncached suffix (row a's whole prompt).
    fresh = max(len(cases[0]), len(cases[1]))
    assert cached.stats["reused_prompt_tokens"] - before == max(len(cases[2]) - fresh, 0)
    expected = plain.generate(cases, params)
    _assert_same([(cases, expected)], [(cases, got)])
    # Row by row too (no padding interplay between the fallback rows and the cached one).
    for key, case, completion in zip(sessions, cases, got):
        alone = cached.generate([case], params, sessions=[key])[0]  # now extends nothing kept: full prefill again
        assert alone.token_ids == completion.token_ids


def test_release_clear_and_sync_weights_drop_caches(sharp):
    model, tokenizer = sharp
    engine = HFEngine(model, tokenizer)
    params = SamplingParams(max_new_tokens=3, temperature=0)
    prompts = _first_prompts(tokenizer)
    engine.generate(prompts, params)
    assert engine.cached_sessions == frozenset() and engine.cached_tokens == 0  # sessions=None keeps nothing
    engine.generate(prompts, params, sessions=[0, 1, 2])
    assert engine.cached_sessions == {0, 1, 2}
    engine.release([1, "unknown"])
    assert engine.cached_sessions == {0, 2}
    engine.sync_weights()
    assert engine.cached_sessions == frozenset() and engine.cached_tokens == 0
    engine.generate(prompts, params, sessions=[0, 1, 2])
    engine.clear_cache()
    assert engine.cached_sessions == frozenset()
    with pytest.raises(ValueError, match="distinct"):
        engine.generate(prompts, params, sessions=[0, 0, 1])
    with pytest.raises(ValueError, match="sessions"):
        engine.generate(prompts, params, sessions=[0, 1])


def test_batches_split_by_max_batch_size_keep_their_sessions(sharp):
    model, tokenizer = sharp
    params = SamplingParams(max_new_tokens=5, temperature=0)
    expected = _play(HFEngine(model, tokenizer), params, turns=3, use_sessions=False)
    got = _play(HFEngine(model, tokenizer, max_batch_size=2), params, turns=3, use_sessions=True)
    _assert_same(expected, got)


def test_lora_model_with_cache_and_sync_after_a_weight_update():
    peft = pytest.importorskip("peft")
    model, tokenizer = load_model("tiny-random", seed=1)
    with torch.no_grad():
        for param in model.parameters():
            if param.ndim == 2:
                param.mul_(6.0)
    model = peft.get_peft_model(
        model, peft.LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", lora_dropout=0.0)
    )
    with torch.no_grad():  # LoRA B starts at zero: make the adapter matter
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(std=0.5, generator=torch.Generator().manual_seed(hash(name) % 2**31))
    params = SamplingParams(max_new_tokens=8, temperature=0)
    plain, cached = HFEngine(model, tokenizer), HFEngine(model, tokenizer)
    _assert_same(_play(plain, params, 3, use_sessions=False), _play(cached, params, 3, use_sessions=True))
    assert cached.stats["reused_prompt_tokens"] > 0

    # An actor update: kept keys/values are stale; sync_weights drops them and results follow the new weights.
    prompts = _first_prompts(tokenizer)
    first = cached.generate(prompts, params, sessions=[0, 1, 2])
    nxt = [p + c.token_ids + [tokenizer.eos_token_id] for p, c in zip(prompts, first)]
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.mul_(-1.0)
    stale = HFEngine(model, tokenizer)
    stale._prefixes = dict(cached._prefixes)  # what an engine that skipped sync_weights would still hold
    cached.sync_weights()
    assert cached.cached_sessions == frozenset()
    old_kv = [c.logprobs for c in stale.generate(nxt, params, sessions=[0, 1, 2])]
    new_kv = [c.logprobs for c in plain.generate(nxt, params)]
    assert max(abs(a[0] - b[0]) for a, b in zip(old_kv, new_kv)) > 1e-3  # stale keys/values change the result
    _assert_same([(nxt, plain.generate(nxt, params))], [(nxt, cached.generate(nxt, params, sessions=[0, 1, 2]))])


def _group_prompts(tokenizer) -> list[list[int]]:
    """Two tasks' first turns as a mixture batch holds them: two long system prompts, each with three distinct
    user turns, each prompt twice (a GRPO group's rollouts)."""
    other = LONG_SYSTEM.replace("text game on a grid", "puzzle game in a warehouse").replace("stairs down", "goal")
    distinct = _first_prompts(tokenizer, LONG_SYSTEM) + _first_prompts(tokenizer, other)
    return [prompt for prompt in distinct for _ in range(2)]


def test_a_shared_prefix_is_prefilled_once_per_task_and_kept_until_the_weights_change(sharp):
    from comprl.llm.engine import SHARED_PREFIX_MIN

    model, tokenizer = sharp
    prompts = _group_prompts(tokenizer)
    off, on = HFEngine(model, tokenizer, shared_prefix=False), HFEngine(model, tokenizer, shared_prefix_prompts=3)
    params = SamplingParams(max_new_tokens=8, temperature=0)
    _assert_same([(prompts, off.generate(prompts, params))], [(prompts, on.generate(prompts, params))])

    # One kept prefix per system prompt: the longest common prefix of its three user turns.
    commons = [os.path.commonprefix(prompts[begin : begin + 6 : 2]) for begin in (0, 6)]
    assert sorted(on._shared) == sorted(tuple(c) for c in commons)
    assert all(len(c) > SHARED_PREFIX_MIN for c in commons)
    # Identical rows are prefilled once with or without it. Every distinct prompt computes the batch's longest
    # suffix past its prefix, and the prefixes are computed once.
    distinct = prompts[::2]
    fresh = max(len(p) - len(commons[i // 3]) for i, p in enumerate(distinct))
    saved = sum(max(len(p) - fresh, 0) for p in distinct) - sum(map(len, commons))
    assert saved > 0
    assert off.stats["computed_tokens"] - on.stats["computed_tokens"] == saved
    assert on.stats["forward_passes"] == off.stats["forward_passes"] + 1  # the prefixes' own pass

    # A later call reuses them (no extra pass); an in-place update of the weights drops them.
    passes = dict(on=on.stats["forward_passes"], off=off.stats["forward_passes"])
    on.generate(prompts[:2], params)
    off.generate(prompts[:2], params)
    assert on.stats["forward_passes"] - passes["on"] == off.stats["forward_passes"] - passes["off"]
    kept = dict(on._shared)
    on.generate(prompts, params)
    assert on._shared.keys() == kept.keys() and all(on._shared[k] is kept[k] for k in kept)
    with torch.no_grad():
        model.model.norm.weight.add_(0.0)  # bumps the tensor's version, as an optimiser step does
    on.generate(prompts, params)
    assert on._shared.keys() == kept.keys() and all(on._shared[k] is not kept[k] for k in kept)


def test_a_new_shared_prefix_waits_for_enough_distinct_prompts_and_a_kept_one_serves_fewer(sharp):
    model, tokenizer = sharp
    fmt = ChatFormat.from_tokenizer(tokenizer)
    few = _first_prompts(tokenizer, LONG_SYSTEM)  # 3 distinct prompts, below the default gate of 8
    words = ("North", "South", "East", "West", "Up", "Down", "Left", "Right")  # distinct first tokens
    many = [fmt.start(LONG_SYSTEM, f"{word} is the way to go.") for word in words[: HFEngine.shared_prefix_prompts]]
    assert len(many) == HFEngine.shared_prefix_prompts
    off, on = HFEngine(model, tokenizer, shared_prefix=False), HFEngine(model, tokenizer)
    params = SamplingParams(max_new_tokens=6, temperature=0)
    _assert_same([(few, off.generate(few, params))], [(few, on.generate(few, params))])
    assert on._shared == {}
    for stat in ("computed_tokens", "forward_passes", "reused_prompt_tokens"):
        assert on.stats[stat] == off.stats[stat], stat

    passes = on.stats["forward_passes"]
    off_passes = off.stats["forward_passes"]
    _assert_same([(many, off.generate(many, params))], [(many, on.generate(many, params))])
    assert len(on._shared) == 1  # enough distinct prompts: their common prefix is prefilled and kept
    kept = next(iter(on._shared))
    assert all(tuple(prompt[: len(kept)]) == kept for prompt in few)  # the system prompt and the user header
    assert on.stats["forward_passes"] - passes == off.stats["forward_passes"] - off_passes + 1

    computed = dict(on=on.stats["computed_tokens"], off=off.stats["computed_tokens"])
    _assert_same([(few, off.generate(few, params))], [(few, on.generate(few, params))])
    assert on.stats["computed_tokens"] - computed["on"] < off.stats["computed_tokens"] - computed["off"]


def test_too_small_a_shared_prefix_gate_is_refused(sharp):
    with pytest.raises(ValueError, match="shared_prefix_prompts=1; accepted: an integer >= 2"):
        HFEngine(*sharp, shared_prefix_prompts=1)


def test_multi_turn_sampling_with_shared_prefixes_matches_without(sharp, assert_logprobs_match_fresh_pass):
    """Turn 1 starts from shared prefixes; later turns mix sessions' kept prefixes with them."""
    model, tokenizer = sharp
    prompts = _group_prompts(tokenizer)
    params = SamplingParams(max_new_tokens=10, temperature=0.7)
    expected = _play(HFEngine(model, tokenizer, shared_prefix=False), params, 3, True, seed=3, prompts=prompts)
    got = _play(HFEngine(model, tokenizer, shared_prefix_prompts=3), params, 3, True, seed=3, prompts=prompts)
    _assert_same(expected, got)
    sequences = [s for turn_prompts, completions in got for s in pack(turn_prompts, completions)]
    assert_logprobs_match_fresh_pass(model, tokenizer.pad_token_id, sequences, 0.7)
