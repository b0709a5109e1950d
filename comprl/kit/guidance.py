"""Can the actor use good experience? Its held-out episodes played free and guided by a given bank.

:func:`guided_and_free` loads the config's actor (untrained: the question is about the actor as a run starts), and
plays the task's held-out seeds twice through the library's evaluation (:func:`comprl.evaluation.play`): free, and
with every episode guided by the entry the experience manager retrieves from a copy of ``bank`` (as a run started
with ``bank.init_from`` would; evaluation searches record nothing). Both passes play the same seeds from the same
random streams, so the only difference is the lesson in the prompt. :func:`guidance_row` sums the two passes up
with 95% Wilson intervals. Notebook 01 runs it over a reference bank (:mod:`comprl.kit.reference_bank`: lessons
written from the experts' play), ``benchmarks/reference_bank.py`` prints more about the same episodes.
"""

from __future__ import annotations

import functools
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from comprl.actor.rollout import Trajectory
from comprl.config import ExperimentConfig
from comprl.kit.evaluate import wilson_interval


@dataclass
class Passes:
    """The free and the guided episodes (same seeds, same order), and each guided query with the entry it got."""

    free: list[Trajectory]
    guided: list[Trajectory]
    shown: list[tuple[str, Any]] = field(default_factory=list)
    extra: list[Trajectory] | None = None
    """A third pass's episodes, where :func:`guided_and_free` was given ``extra_search``."""


def guided_and_free(
    config: ExperimentConfig, bank: str | Path, extra_search: Callable[[Callable], Callable] | None = None,
    progress: bool = True,
) -> Passes:
    """Play ``config.eval_episodes`` held-out episodes of ``config``'s task(s) free, then guided by ``bank``.

    ``config``: the actor, its evaluation settings and the retrieval (method ``static`` or another that uses
    experience; a bank under ``experience.warmup`` entries of a task is gated: set it to 0 to always retrieve).
    ``extra_search``: the manager's search -> another search, for a third pass (e.g. lessons narrowed down)."""
    free, guided = guided_by_banks(config, {"guided": bank}, extra_search, progress)
    passes = guided["guided"]
    return Passes(free, passes.guided, passes.shown, passes.extra)


def guided_by_banks(
    config: ExperimentConfig, banks: Mapping[str, str | Path],
    extra_search: Callable[[Callable], Callable] | None = None, progress: bool = True,
) -> tuple[list[Trajectory], dict[str, Passes]]:
    """The free pass once, then one guided pass per bank of ``banks`` (name -> bank file), with the actor loaded
    once: the same held-out seeds from the same random streams in every pass, so that passes differ only in the
    lesson each episode is shown (:func:`guided_and_free` is this with one bank). Returns the free episodes and,
    per bank name, its :class:`Passes` (``free`` is the shared free pass)."""
    from comprl.evaluation import play
    from comprl.experience import connect
    from comprl.llm import load_model, make_engine, resolve_dtype, sharing_weights
    from comprl.loop import close_envs, make_envs, resolve_device

    if not config.uses_experience:
        raise ValueError(f"method={config.method!r} retrieves nothing; accepted: a method that uses experience")
    if not banks:
        raise ValueError("banks is empty; accepted: at least one name -> bank file")
    device = resolve_device(config)
    model, tokenizer = load_model(
        config.model, dtype=resolve_dtype(config.dtype, device), device=device, seed=config.seed,
        backend=config.actor.backend,
    )
    engine = make_engine(config, model, tokenizer)
    envs = make_envs(config)
    out: dict[str, Passes] = {}
    try:
        free = play(engine, envs, config, progress=progress)
        for name, bank in banks.items():
            shown: list[tuple[str, Any]] = []
            with tempfile.TemporaryDirectory() as folder:
                copy = Path(folder) / "bank.duckdb"
                shutil.copyfile(bank, copy)  # what bank.init_from does at the start of a run
                extractor_model = sharing_weights(model) if config.extractor_shares_base else None
                experience = connect(config, copy, device=str(device), model=extractor_model)
                try:
                    search = functools.partial(experience.search, record=False)

                    def counted(queries: list[str], **kwargs: Any) -> list:
                        entries = search(queries, **kwargs)
                        shown.extend(zip(queries, entries))
                        return entries

                    guided = play(engine, envs, config, search=counted, progress=progress)
                    extra = (
                        play(engine, envs, config, search=extra_search(search), progress=progress)
                        if extra_search else None
                    )
                finally:
                    experience.close()
            out[name] = Passes(free, guided, shown, extra)
    finally:
        close_envs(envs)
    return free, out


def guidance_row(passes: Passes) -> dict[str, Any]:
    """Free and guided success with 95% Wilson intervals, their difference, how many guided episodes were shown an
    entry (the loop's ``guided_with_entry``), and the seeds won by one pass only."""
    n = len(passes.free)
    free_wins, guided_wins = sum(t.success for t in passes.free), sum(t.success for t in passes.guided)
    row: dict[str, Any] = {"episodes": n}
    for name, wins in (("free", free_wins), ("guided", guided_wins)):
        low, high = wilson_interval(wins, n)
        row |= {f"{name}_success": wins / n, f"{name}_low": low, f"{name}_high": high}
    pairs = list(zip(passes.free, passes.guided))  # same seeds, in the same order
    return row | {
        "guided_minus_free": (guided_wins - free_wins) / n,
        "guided_with_entry": sum(bool(t.experience_ids) for t in passes.guided),
        "won_only_guided": sum(g.success and not f.success for f, g in pairs),
        "won_only_free": sum(f.success and not g.success for f, g in pairs),
    }
