"""The experience manager: the paper's background track.

:class:`ExperienceManager` owns everything on the experience side of a run (the bank file, the extractor model
with its prompts and validation, the CISPO trainer and its sample buffer, merging, retrieval through
:class:`~comprl.experience.retrieval.RetrievalPolicy`) and offers the actor side one small interface:

- :meth:`~ExperienceManager.search` — batched retrieval, one entry per query (or per task instance);
- :meth:`~ExperienceManager.submit` — finished episodes for the extractor to distil;
- :meth:`~ExperienceManager.credit` — how the guided episodes that were shown an entry ended;
- :meth:`~ExperienceManager.fence` / :meth:`~ExperienceManager.step_done` — the actor's weight update
  begins / its step is over (fencing, the merge schedule);
- :meth:`~ExperienceManager.search_and_ask` — the actor's mid-episode question, answered by the extractor;
- :meth:`~ExperienceManager.stats` and :meth:`~ExperienceManager.close`.

:func:`comprl.experience.connect` hosts it as ``ExperienceConfig.mode`` says (:mod:`comprl.experience.ray_host`).
``"sync"``: in the caller's process, every call done before it returns (the reference behaviour). ``"async"``:
a Ray actor in its own process (``background=True``), where a background thread drains the distillation queue,
runs the merges and trains the extractor whenever its buffer is full, while searches are batched (at most
``query_batch`` queries or ``query_wait_ms`` after the first, one embedding call per batch) and run on
``search_workers`` threads under the bank's read lock. A search never waits for distillation: the bank's
writer-priority lock is held by a write only while its rows are written, never while the extractor generates.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter, deque
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import torch
from transformers import PreTrainedModel

from comprl import console
from comprl.checkpoint import BackgroundWrite, copied, load_torch, writing
from comprl.config import ExperimentConfig
from comprl.experience.bank import Embedder, Entry, ExperienceBank
from comprl.experience.bank.store import bank_fingerprint
from comprl.experience.interface import Episode, Outcome, checked_search
from comprl.experience.queue_file import queue_path, read_episodes, write_episodes
from comprl.experience.extractor.trainer import ExtractorSample, ExtractorTrainer
from comprl.experience.extractor.scripted import ScriptedTrack
from comprl.experience.extractor.track import ExperienceTrack, reply_rates
from comprl.experience.retrieval import Query, RetrievalPolicy
from comprl.experience.rule_recall import RuleRecall
from comprl.llm import HFEngine, load_model, load_tokenizer, resolve_dtype
from comprl.policy_gradient import PolicyGradientTrainer


SEARCH_COUNTERS = (
    "manager_search_queries", "manager_search_seconds", "manager_search_gated", "manager_search_batches",
    "manager_embedding_calls", "manager_warmup_waits",
)
"""The counters a search adds to (its queries, time, batches and embedding calls, the warm-up gate's refusals and
waits): what ``stats(searches_only=True)`` takes."""


class ExperienceManager:
    """The experience side of one run, behind the interface the actor side calls.

    Args:
        config: the experiment (its ``extractor``, ``bank`` and ``experience`` parts, ``method``, ``seed``,
            ``dtype``).
        bank_path: the run's bank file (created if missing; a persisted queue beside it is picked up).
        device: torch device of the extractor and the embedder.
        background: run distillation, merges and extractor updates on a background thread and searches on a
            batching thread with ``search_workers`` workers (what the Ray-hosted manager does); False = every call
            does its work before returning (``mode="sync"``).
        clock: seconds, for the "recently retrieved" window (injectable for tests).
        checkpoint: a folder written by :meth:`save_checkpoint` to continue from: its bank replaces the file at
            ``bank_path`` (if it is the snapshot the checkpoint recorded) and the extractor, its samples, the queue
            and the random states are restored.
        actor, actor_engine: with ``extractor.share_actor`` (and only then), the actor's trainer and generation
            engine: the extractor is then ``actor.model`` (no model of its own is loaded), generating with the
            tokenizer of ``actor_engine``, and its CISPO trainer updates the actor's weights with an optimiser of
            its own (:class:`~comprl.policy_gradient.PolicyGradientTrainer`, ``weights_of``); after each
            extractor update the actor's engine drops its prefix cache too. Sync only: the actor and the
            extractor take turns in one process.
        model: the extractor's model, loaded by the caller (with ``extractor.share_base``, a copy of the actor's
            module tree over its frozen base weights, :func:`comprl.llm.sharing_weights`); loaded here when None.
            The scripted extractor (``extractor.model="scripted"``, a positive control) has none: nothing is
            loaded, trained or saved for it, and :class:`~comprl.experience.extractor.scripted.ScriptedTrack`
            writes the lessons.
    """

    def __init__(
        self,
        config: ExperimentConfig,
        bank_path: str | Path,
        *,
        device: str = "cpu",
        background: bool = False,
        clock: Callable[[], float] = time.monotonic,
        checkpoint: str | Path | None = None,
        actor: PolicyGradientTrainer | None = None,
        actor_engine: HFEngine | None = None,
        model: PreTrainedModel | None = None,
    ) -> None:
        exp = config.experience
        if background and exp.manager_cores:
            os.sched_setaffinity(0, exp.manager_cores)
            torch.set_num_threads(len(exp.manager_cores))
        if background:  # its own process (Ray), whose output is forwarded to the run's log
            console.quiet_libraries()
        self.config = config
        self.background = background
        # The extractor initialises its adapters and samples from its own torch random state, so that what it writes
        # depends on its inputs and the seed alone, not on the host (sync or Ray), and a manager in the actor's
        # process (sync) leaves the actor's sampling as it would be without it.
        self._torch_rng = torch.Generator().manual_seed(config.seed + 1).get_state()
        self._engine_lock = threading.Lock()  # the extractor model: distillation, merges, updates, search_and_ask
        state = None if checkpoint is None else load_torch(Path(checkpoint) / "manager.pt", classes=[ExtractorSample])
        if checkpoint is not None:
            # refused, before anything is written, unless it is the snapshot this manager.pt was written with
            ExperienceBank.restore(Path(checkpoint) / "bank.duckdb", bank_path, state.get("bank"))
            queue_path(bank_path).unlink(missing_ok=True)  # persisted after the checkpoint: its episodes come again
        if config.extractor.scripted:
            if model is not None or actor is not None or actor_engine is not None:
                raise ValueError(
                    "extractor.model='scripted' loads no model: pass none (model=, actor=, actor_engine=)"
                )
            tokenizer = None
        elif config.extractor.share_actor:
            if actor is None or actor_engine is None:
                raise ValueError(
                    "extractor.share_actor=True: pass the actor's trainer and engine (actor=, actor_engine=)"
                )
            if background:
                raise ValueError(
                    "extractor.share_actor=True needs the in-process manager (background=False, "
                    "experience.mode='sync'): the actor's weights cannot be trained by a background thread or "
                    "another process"
                )
            model, tokenizer = actor.model, actor_engine.tokenizer
        elif actor is not None or actor_engine is not None:
            raise ValueError(
                "actor= and actor_engine= are for extractor.share_actor=True, which this config leaves off"
            )
        elif model is not None:  # loaded by the caller, e.g. over the actor's frozen base (extractor.share_base)
            tokenizer = load_tokenizer(config.extractor.model)
        else:
            dtype = resolve_dtype(config.dtype, device)
            model, tokenizer = load_model(
                config.extractor.model, dtype=dtype, device=torch.device(device), seed=config.seed + 1,
                backend=config.extractor.backend,
            )
        with self._extractor():
            self.trainer = (
                ExtractorTrainer(model, tokenizer.pad_token_id, config.extractor, weights_of=actor)
                if config.trains_extractor else None
            )
        self.engine = None if config.extractor.scripted else HFEngine(
            self.trainer.model if self.trainer else model, tokenizer,
            adapter_dtype=config.extractor.generation_adapter_dtype,
        )
        self._actor_engine = actor_engine
        self.bank = ExperienceBank(
            bank_path, Embedder(config.bank.embedder, device=device), capacity=config.bank.capacity,
            use_vss=config.bank.use_vss, index=config.bank.index,
        )
        self._tracks: dict[str, ExperienceTrack] = {}
        self._rule_recall = RuleRecall(config.task_ids)
        self.retrieval = RetrievalPolicy(
            config, self.bank, clock=clock, wait_for_distillation=self._wait_for_distillation
        )
        self._step = 0

        self._cv = threading.Condition()
        self._queue: deque[Episode] = deque()
        self._outcomes: list[tuple[list[Outcome], int]] = []
        self._merges: deque[int] = deque()
        self._busy = False
        self._suspended = False
        self._holds = 0  # checkpoints copying their state: no new work starts, nothing changes the bank
        self._checkpoint = BackgroundWrite("comprl-manager-checkpoint")
        self._closing = False
        self._counts: Counter = Counter()  # since the last stats()
        self._totals: Counter = Counter()  # taken by stats() before
        self._updates: list[dict[str, float]] = []
        self._gauges: dict[str, float] = {}
        self._error: BaseException | None = None
        self._report: dict[str, Any] | None = None

        if checkpoint is not None:
            self._load_checkpoint(Path(checkpoint), state)
        restored = queue_path(bank_path)
        if restored.is_file():
            episodes = read_episodes(restored)
            self._queue.extend(episodes)
            self._counts["manager_restored"] += len(episodes)
            restored.unlink()

        self._pending: deque[Query] = deque()
        self._worker = self._batcher = self._searchers = None
        if background:
            self._searchers = ThreadPoolExecutor(exp.search_workers, thread_name_prefix="comprl-search")
            self._batcher = threading.Thread(target=self._batch_loop, name="comprl-query-batcher", daemon=True)
            self._worker = threading.Thread(target=self._work_loop, name="comprl-extractor", daemon=True)
            self._batcher.start()
            self._worker.start()
        elif self._queue:
            self._drain()

    def ready(self) -> bool:
        """True once constructed (a Ray client waits on it so that start-up errors surface at once)."""
        return True

    # -----------------------------------------------------------------------------------------------------
    # Retrieval
    # -----------------------------------------------------------------------------------------------------

    def search(
        self, queries: Sequence[str], tasks: Sequence[str], *, seeds: Sequence[int] | None = None, record: bool = True
    ) -> list[Entry | None]:
        """The entry to show for each query, or None (no entry of its task, or its task's bank still below the
        warm-up size).

        Args:
            queries: one text per guided episode (its instruction and first observation).
            tasks: the env id of each query; a query is answered from its own task's entries only.
            seeds: the task instance of each query. With ``bank.per_instance`` the queries of one instance share
                one retrieval (the K/2 guided rollouts see one entry); else each query is one retrieval (the
                official code's: one per guided rollout). ``bank.exclude_own_seed`` uses them too.
            record: a training search (recency and dropout apply, and the shown entries count as recently
                retrieved); False for evaluation, whose result then depends only on the bank, unless
                ``bank.record_eval`` (the official code's) makes it a training search too.
        """
        queries, tasks, seeds = checked_search(queries, tasks, seeds)
        record = record or self.config.bank.record_eval
        if not queries:
            return []
        started = time.perf_counter()
        gated = {task for task in dict.fromkeys(tasks) if not self.retrieval.warmed_up(task)}
        if gated:
            self._count(manager_search_gated=sum(task in gated for task in tasks))
        searched = [i for i, task in enumerate(tasks) if task not in gated]
        if not searched:
            return [None] * len(queries)
        first: dict[Any, int] = {}
        shared = seeds is not None and self.config.bank.per_instance
        slots = {i: first.setdefault((tasks[i], seeds[i]) if shared else i, i) for i in searched}
        asked = sorted(set(slots.values()))
        jobs = [Query(queries[i], tasks[i], None if seeds is None else seeds[i], record, Future()) for i in asked]
        if self.background:
            with self._cv:
                self._pending.extend(jobs)
                self._cv.notify_all()
        else:
            size = self.config.experience.query_batch
            for start in range(0, len(jobs), size):
                self._run_batch(jobs[start : start + size])
        found = {i: job.result.result() for i, job in zip(asked, jobs)}
        self._count(manager_search_queries=len(searched), manager_search_seconds=time.perf_counter() - started)
        return [found[slots[i]] if i in slots else None for i in range(len(queries))]

    def search_later(
        self, queries: Sequence[str], tasks: Sequence[str], *, seeds: Sequence[int] | None = None, record: bool = True
    ) -> Future:
        """:meth:`search` as a future (here it is done before returning; the Ray client's runs meanwhile)."""
        result: Future = Future()
        result.set_result(self.search(queries, tasks, seeds=seeds, record=record))
        return result

    def _batch_loop(self) -> None:
        """Flush pending queries at ``query_batch`` of them or ``query_wait_ms`` after the first, to a worker."""
        size, wait = self.config.experience.query_batch, self.config.experience.query_wait_ms / 1000
        while True:
            with self._cv:
                while not self._pending and not self._closing:
                    self._cv.wait()
                if not self._pending:
                    return
                deadline = time.monotonic() + wait
                while len(self._pending) < size and not self._closing and (left := deadline - time.monotonic()) > 0:
                    self._cv.wait(left)
                batch = [self._pending.popleft() for _ in range(min(size, len(self._pending)))]
            self._searchers.submit(self._run_batch, batch)

    def _run_batch(self, batch: list[Query]) -> None:
        """Answer a batch of queries (:meth:`RetrievalPolicy.choose`), handing each its entry or the error."""
        try:
            for query, entry in zip(batch, self.retrieval.choose(batch)):
                query.result.set_result(entry)
            self._count(manager_search_batches=1, manager_embedding_calls=1)
        except BaseException as error:  # the waiting callers get the error instead of hanging
            for query in batch:
                if not query.result.done():
                    query.result.set_exception(error)

    def _wait_for_distillation(self, seconds: float) -> bool:
        """The warm-up gate's wait: up to ``seconds`` (at most one) while the extractor has work in progress;
        False at once when it has none (sync mode never has: its work is done before each call returns)."""
        with self._cv:
            in_flight = self.background and (self._queue or self._busy) and not self._closing
            if not in_flight or seconds <= 0:
                return False
            self._counts["manager_warmup_waits"] += 1
            self._cv.wait(min(seconds, 1.0))
            return True

    # -----------------------------------------------------------------------------------------------------
    # Episodes in, credit, the step boundary
    # -----------------------------------------------------------------------------------------------------

    def submit(self, episodes: Sequence[Episode]) -> int:
        """Queue finished episodes for distillation (sync: distil them now); returns how many were queued.

        A full queue never silently loses an episode: ``on_full="drop_oldest"`` drops the oldest waiting ones
        and counts them (``manager_dropped``); ``"block"`` waits for room (``manager_blocked_seconds``).
        """
        exp = self.config.experience
        with self._cv:
            self._raise_background_error()
            for episode in episodes:
                if len(self._queue) >= exp.queue_size:
                    if exp.on_full == "drop_oldest" or not self.background:
                        self._queue.popleft()
                        self._counts["manager_dropped"] += 1
                    else:
                        started = time.perf_counter()
                        while len(self._queue) >= exp.queue_size and self._error is None:
                            self._cv.wait(1.0)
                        self._counts["manager_blocked_seconds"] += time.perf_counter() - started
                self._queue.append(episode)
            self._counts["manager_submitted"] += len(episodes)
            self._cv.notify_all()
        if not self.background:
            self._drain()
        return len(episodes)

    def credit(self, outcomes: Sequence[Outcome], step: int) -> None:
        """Record how the guided episodes that were shown an entry ended: the entries' use counts at once, the
        credit of the extractor samples that wrote them when the extractor is next free."""
        outcomes = list(outcomes)
        self._wait_for_bank_copy()
        self.bank.record_uses([o.entry_id for o in outcomes], [o.success for o in outcomes], step)
        with self._cv:
            self._outcomes.append((outcomes, step))
            self._cv.notify_all()
        if not self.background:
            self._drain()

    def fence(self) -> None:
        """The actor is about to update and sync its weights (``ExperienceConfig.fence``; sync: nothing to do)."""
        fence = self.config.experience.fence
        if not self.background or fence == "none":
            return
        started = time.perf_counter()
        with self._cv:
            if fence == "flush":
                self._cv.wait_for(self._idle, timeout=self.config.experience.flush_timeout_s)
            self._suspended = True
        self._count(manager_fence_seconds=time.perf_counter() - started)

    def step_done(self, step: int) -> None:
        """The actor's step ``step`` is over: lift the fence and schedule this step's merge (every ``merge_every``;
        at most ``experience.max_pending_merges`` wait, a new one replacing the newest waiting one)."""
        merge_every = self.config.extractor.merge_every
        with self._cv:
            self._raise_background_error()
            self._step = step
            self._suspended = False
            if merge_every and step % merge_every == 0:
                if len(self._merges) >= self.config.experience.max_pending_merges:
                    self._merges.pop()  # subsumed by this one, which passes over every entry it would have
                    self._counts["manager_merges_coalesced"] += 1
                self._merges.append(step)
            self._cv.notify_all()
        if not self.background:
            self._drain()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every submitted episode, outcome and merge has been processed; False on timeout."""
        with self._cv:
            done = self._cv.wait_for(lambda: self._idle() or self._error is not None, timeout=timeout)
            self._raise_background_error()
            return done

    def _idle(self) -> bool:
        return not (self._queue or self._outcomes or self._merges or self._busy)

    # -----------------------------------------------------------------------------------------------------
    # The extractor's work: in the caller (sync) or on the background thread
    # -----------------------------------------------------------------------------------------------------

    def _take(self) -> tuple[list[tuple[list[Outcome], int]], int | None, list[Episode]]:
        """The next unit of work: all waiting outcomes, then a merge or a batch of episodes (callers hold _cv)."""
        outcomes, self._outcomes = self._outcomes, []
        if self._merges:
            return outcomes, self._merges.popleft(), []
        size = self.config.experience.distill_batch
        return outcomes, None, [self._queue.popleft() for _ in range(min(size, len(self._queue)))]

    def _drain(self) -> None:
        """Sync mode: do all waiting work now."""
        self._wait_for_bank_copy()
        while True:
            with self._cv:
                if self._idle():
                    return
                work = self._take()
            self._process(*work)

    def _work_loop(self) -> None:
        # The extractor runs at the lowest priority, so that a search sharing its core is not slowed by generation.
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        while True:
            with self._cv:
                self._cv.wait_for(lambda: self._closing or (not (self._suspended or self._holds) and not self._idle()))
                if self._idle() and self._closing:
                    return
                if (self._suspended or self._holds) and not self._closing:
                    continue
                work = self._take()
                self._busy = True
            try:
                self._process(*work)
            except BaseException as error:  # surfaced to the actor side by its next call
                with self._cv:
                    self._error = error
                    self._busy = False
                    self._cv.notify_all()
                return
            with self._cv:
                self._busy = False
                self._cv.notify_all()

    @contextmanager
    def _extractor(self) -> Iterator[None]:
        """Hold the extractor model, drawing from the manager's own random state (the caller's is restored)."""
        with self._engine_lock, torch.random.fork_rng(devices=[]):
            torch.set_rng_state(self._torch_rng)
            yield
            self._torch_rng = torch.get_rng_state()

    def _process(
        self, outcomes: list[tuple[list[Outcome], int]], merge_step: int | None, episodes: list[Episode]
    ) -> None:
        with self._extractor():
            samples: list[ExtractorSample] = []
            if self.trainer is not None:
                for batch, step in outcomes:
                    self.trainer.credit(batch, step)
            if merge_step is not None:
                for task in sorted(self._live_tasks()):
                    samples += self._track(task).merge(merge_step)
                self._count(manager_merges=1)
            by_task: dict[str, list[Episode]] = {}
            for episode in episodes:
                by_task.setdefault(episode.task, []).append(episode)
            for task, group in by_task.items():
                samples += self._track(task).distill(group, max(e.step for e in group))
                self._count(manager_distilled=len(group))
            if self.trainer is not None:
                self.trainer.add(samples)
                if (update := self.trainer.maybe_step()) is not None:  # every update the buffer allows
                    self.engine.sync_weights()
                    if self._actor_engine is not None:  # share_actor: the actor's weights changed too
                        self._actor_engine.sync_weights()
                    with self._cv:
                        self._updates.append(update)
                self._gauges = {
                    "extractor_pending": float(len(self.trainer.pending)),
                    "extractor_ready": float(len(self.trainer.ready)),
                }
            for track in self._tracks.values():
                self._count(**track.take_stats())

    def _track(self, task: str) -> ExperienceTrack:
        if task not in self._tracks:
            self._tracks[task] = (
                ScriptedTrack(self.bank, self.config.extractor, task) if self.config.extractor.scripted
                else ExperienceTrack(self.engine, self.bank, self.config.extractor, task=task)
            )
        return self._tracks[task]

    def _live_tasks(self) -> set[str]:
        return set(self.bank.entries()["task"]) | set(self._tracks)

    # -----------------------------------------------------------------------------------------------------
    # search_and_ask, metrics, shutdown
    # -----------------------------------------------------------------------------------------------------

    def search_and_ask(self, query: str, task: str) -> str | None:
        """The best entry for ``query``, rewritten by the extractor to answer it; None when none can be shown.

        The extractor is shared with distillation, so an answer waits for the batch in progress.
        """
        started = time.perf_counter()
        (entry,) = self.search([query], [task])
        answer = None
        if entry is not None:
            with self._extractor():
                answer = self._track(task).refine(entry, query)
        self._count(
            manager_asks=1, manager_asks_answered=answer is not None,
            manager_ask_seconds=time.perf_counter() - started,
        )
        return answer

    def stats(self, *, searches_only: bool = False) -> dict[str, float]:
        """Counters since the last call (then zeroed), the extractor's reply diagnostics over them
        (:func:`~comprl.experience.extractor.track.reply_rates`), and gauges: queue length, bank size, extractor
        buffer, and on tasks with a hidden fact the live entries' rule recall
        (:class:`~comprl.experience.rule_recall.RuleRecall`).

        ``searches_only`` takes the counters of searches alone (:data:`SEARCH_COUNTERS`) and leaves the rest, the
        extractor's work above all, to the next call: how the loop keeps an evaluation's lookups out of the
        training rows without losing what the extractor did meanwhile (in async mode it goes on working)."""
        with self._cv:
            self._raise_background_error()
            if searches_only:
                counts = Counter({k: self._counts.pop(k) for k in SEARCH_COUNTERS if k in self._counts})
                updates = []
            else:
                counts, self._counts = self._counts, Counter()
                updates, self._updates = self._updates, []
            self._totals.update(counts)
            metrics = {k: float(v) for k, v in counts.items()}
            metrics["manager_queue"] = float(len(self._queue))
        metrics.setdefault("manager_search_queries", 0.0)
        queries = max(metrics["manager_search_queries"], 1)
        metrics["retrieval_ms_per_query"] = 1000 * metrics.get("manager_search_seconds", 0.0) / queries
        metrics.update(reply_rates(metrics))
        metrics.update(self._gauges)
        if updates:  # the metrics of the latest batch of updates, and how many updates there were in all
            metrics.update({f"extractor_{k}": v for k, v in updates[-1].items()})
        metrics["extractor_updates"] = sum(u["updates"] for u in updates)
        metrics["bank_size"] = float(len(self.bank))
        if not searches_only:
            metrics.update(self._rule_recall.live(self.bank))
        return metrics

    def close(self) -> dict[str, Any]:
        """Stop: distil what is queued (``shutdown="drain"``) or write it beside the bank (``"persist"``), close
        the bank, and report what was done (``dropped``: episodes dropped from a full queue in the manager's
        whole life, whatever :meth:`stats` reported meanwhile; ``stats``: :meth:`stats` once the work is done, the
        counters of what the manager did after the last call, the shutdown's drain included, or ``{}`` when it did
        nothing since then). A later call returns the same report."""
        if self._report is not None:
            return self._report
        self._checkpoint.wait()  # one being written still copies the bank
        persist = self.config.experience.shutdown == "persist"
        report: dict[str, Any] = {"drained": 0, "persisted": 0}
        with self._cv:
            if persist and self._queue:
                write_episodes(queue_path(self.bank.path), self._queue)
                report["persisted"] = len(self._queue)
                self._queue.clear()
            report["drained"] = len(self._queue)
            self._closing = True
            self._suspended = False
            self._cv.notify_all()
        if self.background:
            self._worker.join()
            self._batcher.join()
            self._searchers.shutdown(wait=True)
        else:
            self._drain()
        report["stats"] = self.stats() if self._error is None and (self._counts or self._updates) else {}
        report["dropped"] = int(self._totals["manager_dropped"] + self._counts["manager_dropped"])
        report["bank_size"] = len(self.bank)
        report["error"] = None if self._error is None else repr(self._error)
        self.bank.close()
        self._report = report
        return report

    # -----------------------------------------------------------------------------------------------------
    # Checkpoints
    # -----------------------------------------------------------------------------------------------------

    def save_checkpoint(self, directory: str | Path) -> None:
        """Take the experience side's checkpoint as of this call and write it to ``directory`` in a thread while the
        caller goes on (:meth:`wait_checkpoint` waits for the files): a snapshot of the bank (``bank.duckdb``), the
        episodes still queued (``queue.jsonl``), and in ``manager.pt`` the extractor's trainable weights, optimiser
        and samples, the outcomes and merges not yet processed, the random states, the retrieval counters and the
        bank snapshot's fingerprint (a resume refuses any other bank file in its place).

        What the actor has handed over (episodes, outcomes, merges, the step) is taken at once, and so is the
        extractor's state when it is between two units of work (always in sync mode). A unit in progress (async)
        belongs to the checkpoint: the thread waits for it to end, then takes the extractor's state. Until the thread
        has copied the bank, the extractor starts no new work and nothing changes the bank (a credit, and in sync
        mode the work of the next calls, waits for the copy); searches go on.

        Recency is kept as the age of each entry's last retrieval, so a resumed run sees the same entries as
        recently retrieved only if it continues within ``bank.recent_seconds``; time while stopped does not count.
        """
        self._checkpoint.wait()
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        with self._cv:
            self._raise_background_error()
            queue, merges = list(self._queue), list(self._merges)
            outcomes = [
                ([(o.entry_id, o.success, o.free_success) for o in batch], step) for batch, step in self._outcomes
            ]
            state = {
                "step": self._step, "warm": set(self.retrieval.warm), "outcomes": outcomes, "merges": merges,
                "retrieval": self.retrieval.state_dict(),
            }
            extractor = None if self._busy else self._extractor_state()
            self._holds += 1
        self._checkpoint.start(lambda: self._write_checkpoint(directory, state, queue, extractor))

    def wait_checkpoint(self) -> None:
        """Wait until the files of the last :meth:`save_checkpoint` are written; raise what stopped them, once."""
        self._checkpoint.wait()

    def _write_checkpoint(
        self, directory: Path, state: dict[str, Any], queue: list[Episode], extractor: dict[str, Any] | None
    ) -> None:
        try:
            if extractor is None:  # the unit of work in progress at save_checkpoint
                with self._cv:
                    self._cv.wait_for(lambda: not self._busy or self._error is not None)
                    self._raise_background_error()
                    extractor = self._extractor_state()
            with writing(directory / "bank.duckdb"):
                self.bank.snapshot(directory / "bank.duckdb")
        finally:
            with self._cv:
                self._holds -= 1
                self._cv.notify_all()
        with writing(directory / "queue.jsonl"):
            write_episodes(directory / "queue.jsonl", queue)
        bank = bank_fingerprint(directory / "bank.duckdb")  # what a resume checks the snapshot against
        with writing(directory / "manager.pt"):
            torch.save({**state, **extractor, "bank": bank}, directory / "manager.pt")

    def _extractor_state(self) -> dict[str, Any]:
        """The extractor's part of a checkpoint, copied (callers hold ``_cv`` between two units of its work)."""
        trainer = None if self.trainer is None else self.trainer.state_dict()
        return copied({"extractor_rng": self._torch_rng, "trainer": trainer})

    def _wait_for_bank_copy(self) -> None:
        """Wait while a checkpoint is copying the bank, before changing it."""
        with self._cv:
            self._cv.wait_for(lambda: not self._holds)

    def _load_checkpoint(self, directory: Path, state: dict[str, Any]) -> None:
        """Restore what :meth:`save_checkpoint` wrote: ``state`` is its ``manager.pt``, loaded as tensors, plain data
        and extractor samples only (:func:`comprl.checkpoint.load_torch`); the bank file was put back before it was
        opened, once it matched the snapshot's fingerprint in ``state``."""
        if (self.trainer is None) != (state["trainer"] is None):
            trained = "did not train" if self.trainer else "trained"
            raise ValueError(f"checkpoint {directory} was written by a run that {trained} its extractor")
        if self.trainer is not None:
            self.trainer.load_state_dict(state["trainer"])
            self.engine.sync_weights()
        self._step = state["step"]
        self.retrieval.warm = set(state["warm"])
        self._outcomes = [([Outcome(*o) for o in batch], step) for batch, step in state["outcomes"]]
        self._merges = deque(state["merges"])
        self._queue.extend(read_episodes(directory / "queue.jsonl"))
        self._torch_rng = state["extractor_rng"]
        self.retrieval.load_state_dict(state["retrieval"])

    def _count(self, **values: float) -> None:
        with self._cv:
            self._counts.update(values)

    def _raise_background_error(self) -> None:
        if self._error is not None:
            raise RuntimeError(f"the experience manager's background thread failed: {self._error!r}") from self._error
