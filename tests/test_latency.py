"""comprl.kit.latency without timing anything: configs per mode, the core split, the table's arithmetic, and the
protocol that makes every mode play the same episodes."""

from __future__ import annotations

import os

import pandas as pd
import pytest

from comprl.kit.latency import (
    CLOCKS, measure_overhead, mode_config, overhead_table, plot_overhead, split_cores, verdict,
)
from comprl.loop import run_experiment


def test_mode_config_maps_modes_to_methods_and_batch_sizes():
    none = mode_config("smoke", "none", 16, (1,))
    assert (none.method, none.batch_instances, none.group_size, none.eval_episodes) == ("baseline", 4, 4, 0)
    sync = mode_config("smoke", "sync", 8, (1,), steps=5)
    assert (sync.method, sync.experience.mode, sync.batch_instances, sync.steps) == ("comp_rl", "sync", 2, 5)
    async_ = mode_config("smoke", "async", 16, (1,), group_size=8)
    assert (async_.experience.mode, async_.experience.manager_cores, async_.batch_instances) == ("async", (1,), 2)
    with pytest.raises(ValueError, match="multiple of group_size=4"):
        mode_config("smoke", "sync", 6)
    assert mode_config("smoke", "loaded", 16, (1,)) == none  # the same run; a neighbour process is what differs
    with pytest.raises(ValueError, match="accepted: none, loaded, sync, async"):
        mode_config("smoke", "ray", 8)


def test_split_cores_defaults_checks_and_warns_on_overlap():
    available = sorted(os.sched_getaffinity(0))
    actor, manager, caption = split_cores() if len(available) > 1 else (None, None, None)
    if actor is not None:
        assert manager == (available[-1],) and not set(actor) & set(manager)
        assert "NOT disjoint" not in caption and f"Ray client threads) on cores {available[-1]}" in caption
    with pytest.raises(ValueError, match="need non-empty sets"):
        split_cores((0,), (max(available) + 1,))
    with pytest.warns(UserWarning, match="share core"):
        *_, shared = split_cores((available[0],), (available[0],))
    assert "NOT disjoint" in shared


def rows(mode: str, batch: int, rollout: list[float], search: float | None = None, tokens: float = 100.0) -> list[dict]:
    """Metric rows of one run: an eval row, then one train row per step (``tokens`` processed by its rollout)."""
    out = [{"step": 0, "phase": "eval", "mode": mode, "batch_size": batch, "rollout_seconds": 99.0}]
    for step, seconds in enumerate(rollout, start=1):
        row = {"step": step, "phase": "train", "mode": mode, "batch_size": batch, "rollout_seconds": seconds,
               "step_seconds": seconds + 1, "processed_tokens": tokens}
        if search is not None:
            row |= {"manager_search_seconds": search, "manager_search_queries": batch / 2}
        out.append(row)
    return out


def test_overhead_table_drops_warmup_steps_and_divides_by_none_at_the_same_batch_size():
    metrics = pd.DataFrame(
        rows("async", 4, [50.0, 50.0, 3.0, 5.0], search=0.5, tokens=160.0) + rows("none", 4, [70.0, 9.0, 2.0, 2.0])
        + rows("sync", 4, [60.0, 60.0, 6.0, 6.0], search=1.0) + rows("none", 8, [80.0, 80.0, 4.0, 4.0])
        + rows("async", 8, [30.0, 30.0, 4.0, 4.0], search=2.0) + rows("loaded", 8, [5.0, 5.0, 3.2, 3.2])
    )
    table = overhead_table(metrics, skip=2)
    assert list(zip(table["batch_size"], table["mode"])) == [
        (4, "none"), (4, "sync"), (4, "async"), (8, "none"), (8, "loaded"), (8, "async")
    ]
    by = table.set_index(["batch_size", "mode"])
    assert (table["steps"] == 2).all()  # steps 3 and 4; the eval row never counts
    assert by.loc[(4, "async"), "rollout_s"] == 4.0 and by.loc[(4, "async"), "rollout_ratio"] == 2.0
    assert by.loc[(4, "sync"), "rollout_ratio"] == 3.0 and by.loc[(4, "sync"), "step_ratio"] == 7.0 / 3.0
    assert by.loc[(8, "async"), "rollout_ratio"] == 1.0 and by.loc[(8, "none"), "rollout_ratio"] == 1.0
    # async at 4 processed 1.6x the tokens none did: per token it took 2.0 / 1.6 the time
    assert by.loc[(4, "async"), "per_token_ratio"] == 1.25 and by.loc[(4, "sync"), "per_token_ratio"] == 3.0
    assert by.loc[(4, "none"), "search_s"] == 0.0 and by.loc[(8, "async"), "queries"] == 4.0
    assert (table["actor_wait_s"] == 0.0).all()  # metrics the rows lack read as zero
    assert verdict(table).splitlines() == [
        "sync: rollout 3.00x..3.00x of none (3.00x..3.00x per token), whole step 2.33x..2.33x",
        "async: rollout 1.00x..2.00x of none (1.00x..1.25x per token), whole step 1.00x..1.67x: "
        "MISSES the target <= 1.02x at every batch size",
        "loaded: rollout 0.80x..0.80x of none (0.80x..0.80x per token), whole step 0.84x..0.84x",
        "the modes' rollouts processed different numbers of tokens at each batch size",
        "async rollout / loaded (the manager's own cost, shared caches and memory aside): 1.25x..1.25x",
    ]


def test_rounds_give_each_ratio_its_mean_and_t_interval_against_the_same_rounds_none(tmp_path):
    rounds = []
    for round_, (none, async_) in enumerate([(2.0, 2.0), (4.0, 6.0), (2.0, 3.0)]):  # async/none: 1.0, 1.5, 1.5
        one = rows("none", 8, [9.0, none, none]) + rows("async", 8, [9.0, async_, async_], search=0.5)
        rounds += [row | {"round": round_} for row in one]
    table = overhead_table(pd.DataFrame(rounds), skip=1).set_index("mode")
    assert table.loc["async", "rollout_ratio"] == pytest.approx(4.0 / 3.0)  # of the rounds' ratios, not of means
    assert table.loc["async", "rounds"] == 3 and table.loc["async", "steps"] == 6
    half = 4.302653 * (1.0 / 12) ** 0.5 / 3**0.5  # t(0.975, 2) x sd / sqrt(3)
    assert table.loc["async", "rollout_ratio_low"] == pytest.approx(4.0 / 3.0 - half, abs=1e-6)
    assert table.loc["async", "rollout_ratio_high"] == pytest.approx(4.0 / 3.0 + half, abs=1e-6)
    assert table.loc["none", "rollout_ratio_low"] == table.loc["none", "rollout_ratio_high"] == 1.0
    assert "over 3 rounds: b8 1.33x [0.62, 2.05]" in verdict(table.reset_index())
    # a mean over the target is not a miss while its interval spans the target
    assert "cannot tell (an interval spans it) whether it meets the target" in verdict(table.reset_index())
    bars = plot_overhead(table.reset_index(), tmp_path / "overhead").axes[0].collections  # the interval, drawn
    assert [segments.get_segments()[0][:, 1].tolist() for segments in bars] == [[pytest.approx(0.6159, abs=1e-3),
                                                                                pytest.approx(2.0508, abs=1e-3)]]
    single = overhead_table(pd.DataFrame([row for row in rounds if row["round"] == 0]), skip=1)
    assert single["rounds"].eq(1).all() and single["rollout_ratio_low"].isna().all()
    assert "rounds" not in verdict(single)


@pytest.mark.parametrize("extractor_lora_rank", [0, 4])  # 4: the cpu profile's extractor draws adapters at start
def test_identical_protocol_plays_the_baselines_episodes_token_for_token(tmp_path, extractor_lora_rank):
    # what measure_overhead(identical=True) runs: a frozen actor, and entries retrieved but not shown
    frozen = {
        "steps": 2, "eval_episodes": 0, "actor.learning_rate": 0.0, "experience.blind": True,
        "extractor.lora_rank": extractor_lora_rank,
    }
    columns = ["processed_tokens", "mean_sequence_tokens", "success_rate", "invalid_action_rate"]
    runs = {}
    for mode in ("none", "sync"):
        config = mode_config("smoke", mode, 8, **frozen)
        runs[mode] = run_experiment(config, tmp_path, name=mode, progress=False).metrics().query("phase == 'train'")
    assert runs["sync"]["guided_with_entry"].sum() > 0  # the manager searched, and found entries to credit
    pd.testing.assert_frame_equal(
        runs["sync"][columns].reset_index(drop=True), runs["none"][columns].reset_index(drop=True)
    )


def test_a_killed_measurement_resumes_at_the_round_and_batch_size_it_was_in(tmp_path):
    cores = sorted(os.sched_getaffinity(0))[:1]  # one core for both sides: this checks bookkeeping, not timing
    measure = dict(steps=2, skip=1, output_dir=tmp_path, actor_cores=cores, manager_cores=cores, resume=True, rounds=2)
    with pytest.warns(UserWarning, match="share core"):
        first = measure_overhead("smoke", [4], ["none", "sync"], **measure)
    done = {path.parent.name: path.read_text() for path in tmp_path.glob("*/finished")}
    assert sorted(done) == ["none_b4", "none_b4_r1", "sync_b4", "sync_b4_r1"]
    assert (first["rounds"] == 2).all() and (first["steps"] == 2).all()  # one measured step per round
    assert first["rollout_ratio_low"].notna().all()
    (tmp_path / "sync_b4_r1" / CLOCKS).unlink()  # as if killed between sync's end in round 1 and its clocks written
    with pytest.warns(UserWarning, match="share core"):
        second = measure_overhead("smoke", [4], ["none", "sync"], **measure)
    again = {path.parent.name: path.read_text() for path in tmp_path.glob("*/finished")}
    assert [name for name in sorted(done) if again[name] == done[name]] == ["none_b4", "sync_b4"]  # round 0 read
    assert (second["actor_cpu_s"] > 0).all()
    assert not second["step_s"].equals(first["step_s"])  # round 1's modes ran again, both
    with pytest.warns(UserWarning, match="share core"):
        measure_overhead("smoke", [4], ["none"], **{**measure, "resume": False, "rounds": 1})
    afresh = {path.parent.name: path.read_text() for path in tmp_path.glob("*/finished")}
    assert afresh["none_b4"] != done["none_b4"]  # without resume: run again