"""The learned extractor's rule recall before any training (issue 68): what the cpu profile's extractor writes from
episodes that won each vault, i.e. the prior that CISPO updates would have to improve on.

    nice -n 10 python benchmarks/extractor_recall.py                                # Vault-v0 (10-20 minutes)
    nice -n 10 python benchmarks/extractor_recall.py --env-id comprl/Vault-Code-v0  # 3-move codes, no gate
    nice -n 10 python benchmarks/extractor_recall.py --extractor-model gemma3-270m    # the larger extractor

For each vault of ``--env-id``, one episode that played its secret and won (:func:`comprl.kit.mechanism.won_episodes`,
on the real env) is distilled ``--samples`` times by the real experience track
(:class:`~comprl.experience.extractor.track.ExperienceTrack`: the cpu profile's extractor model, its prompts,
temperature and token cap, parser and bank writes) into a scratch bank, with no update of the extractor: once as
free text (the profile's note style) and once under the lesson grammar (``extractor.lesson_grammar``: "Prefer ACTION
when" / "Avoid ACTION when", ACTION one the episode played, here its secret). The scripted extractor
(:class:`~comprl.experience.extractor.scripted.ScriptedTrack`, which writes the winning moves literally) on the same
episodes is the reference column.

How to read it: one column per extractor. Counts of replies come with their share of the replies (stored, rejected
and each rejection reason, cut at the token cap); the lesson rows with their share of the stored lessons:

- *names its vault*: the text holds the vault's name, the one word in which the retrieval queries of the vaults
  differ (the instruction and first observation): a lesson that does not name its vault has nothing to be told
  apart by.
- *states its secret*: :func:`comprl.envs.lesson_states_secret` on title and content, for the episode's seed (the
  loop's ``rule_recall_live`` judgement). It reads only which moves a lesson names, so "Avoid north when ..." on a
  vault that opens to north counts; *secret, but "Avoid"* says how many of them tell the actor the opposite. Under
  the grammar a won one-move episode offers its secret as the only ACTION, so there the share is near 100% by
  construction (less lessons that go on to name another move).
- *>= gate*: cosine similarity to its own vault's retrieval query (the bank's embedder) at or above the task's
  ``bank.min_similarity`` (:data:`comprl.kit.mechanism.VAULT_GATE` on Vault-v0; n/a for a task without a gate): a
  lesson below it is never shown to a guided episode of its vault.
- *secret and >= gate*: the lessons that could help at all: shown to their own vault and naming its move.

The learned arms of notebook 07 can only work if this last share is well above zero, or if training can raise it
from the few lessons that reach it (a lesson earns credit only when it is shown and its episode wins). The scripted
column should read 100% on both on Vault-v0; where it does not, the gate or the judgement is at fault, not the
extractor.
"""

from __future__ import annotations

import argparse
import functools
import tempfile
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import torch

from comprl.experience.bank import Embedder, ExperienceBank
from comprl.experience.extractor.scripted import ScriptedTrack
from comprl.experience.extractor.track import ExperienceTrack
from comprl.experience.interface import seed_of
from comprl.experience.rule_recall import secret_verdicts
from comprl.envs.vault import vault_of
from comprl.kit.mechanism import VAULT, mechanism_config, won_episodes
from comprl.llm import HFEngine, load_model, resolve_dtype

OF_REPLIES = ("stored", "rejected", "cut at the cap")
"""Rows shown with their share of the replies (and every ``rejected: REASON`` row)."""
OF_STORED = ("names its vault", "states its secret", 'secret, but "Avoid"', ">= gate", "secret and >= gate")
"""Rows shown with their share of the stored lessons."""


def lessons(env_id: str, bank: ExperienceBank, query_vectors: np.ndarray, embedder: Embedder) -> pd.DataFrame:
    """The bank's live lessons, each with the seed of the episode it was distilled from, its text (title and
    content, what the actor is shown), whether it names that seed's vault and states its secret, and its cosine
    similarity to that seed's retrieval query (``query_vectors[seed]``: seed i meets vault i)."""
    entries = bank.entries()
    verdicts = secret_verdicts(entries, bank.operations())
    written = bank.operations().drop_duplicates("entry_id").set_index("entry_id")["source"]
    table = pd.DataFrame({
        "seed": [seed_of(written[i]) for i in entries["id"]],
        "content": entries["content"].tolist(),
        "text": [f"{t}\n{c}" for t, c in zip(entries["title"], entries["content"])],
        "secret": [bool(verdicts[i]) for i in entries["id"]],
    })
    table["vault"] = [vault_of(env_id, s).lower() in t.lower() for s, t in zip(table["seed"], table["text"])]
    vectors = embedder.encode(table["text"].tolist())
    table["similarity"] = [float(v @ query_vectors[s]) for v, s in zip(vectors, table["seed"])]
    return table


def measure(
    make_track: Callable[[ExperienceBank], ExperienceTrack], episodes: list, samples: int, embedder: Embedder,
    query_vectors: np.ndarray, gate: float | None,
) -> tuple[dict[str, float | str], pd.DataFrame]:
    """Distil ``episodes`` ``samples`` times with the track ``make_track`` builds over a scratch bank: the column
    of counts and shares, and the stored lessons (:func:`lessons`)."""
    with tempfile.TemporaryDirectory() as folder:
        bank = ExperienceBank(Path(folder) / "bank.duckdb", embedder)
        try:
            track = make_track(bank)
            tokens = []
            for step in range(samples):
                tokens += [s.num_action_tokens for s in track.distill(episodes, step=step)]
                print(f"  distilled {step + 1}/{samples} x {len(episodes)} episodes", flush=True)
            stats = track.stats
            stored = lessons(track.task, bank, query_vectors, embedder)
        finally:
            bank.close()
    above = stored["similarity"] >= gate if gate is not None else None
    column: dict[str, float | str] = {
        "replies": stats.outputs,
        "stored": len(stored),
        "rejected": sum(stats.rejected.values()),
        **{f"rejected: {reason}": n for reason, n in sorted(stats.rejected.items())},
        "cut at the cap": stats.cut,
        "names its vault": int(stored["vault"].sum()),
        "states its secret": int(stored["secret"].sum()),
        'secret, but "Avoid"': int((stored["secret"] & stored["content"].str.startswith("Avoid ")).sum()),
        ">= gate": "n/a" if above is None else int(above.sum()),
        "secret and >= gate": "n/a" if above is None else int((stored["secret"] & above).sum()),
        "mean similarity to own query": float(stored["similarity"].mean()) if len(stored) else float("nan"),
        "mean tokens per reply": float(np.mean(tokens)) if any(tokens) else "n/a",
    }
    return column, stored


def print_side_by_side(columns: dict[str, dict[str, float | str]]) -> None:
    """One row per count, one column per extractor: counts of :data:`OF_REPLIES` (and rejection reasons) with their
    share of the replies, of :data:`OF_STORED` with their share of the stored lessons, other rows as they are."""
    rows = list(dict.fromkeys(row for column in columns.values() for row in column))
    rows = [r for r in rows if not r.startswith("rejected: ")]
    reasons = sorted({r for column in columns.values() for r in column if r.startswith("rejected: ")})
    rows[rows.index("rejected") + 1 : rows.index("rejected") + 1] = reasons
    print(f"  {'':<30}" + "".join(f"{name:>22}" for name in columns))
    for row in rows:
        cells = []
        for column in columns.values():
            value = column.get(row, 0)
            total = column["replies"] if row in OF_REPLIES or row.startswith("rejected: ") else column["stored"]
            if isinstance(value, str):
                cells.append(value)
            elif row in OF_REPLIES or row in OF_STORED or row.startswith("rejected: "):
                share = f"{value / total:6.1%}" if total else "   n/a"
                cells.append(f"{value:>4.0f} ({share})")
            elif float(value).is_integer():
                cells.append(f"{value:.0f}")
            else:
                cells.append(f"{value:.3f}")
        print(f"  {row:<30}" + "".join(f"{cell:>22}" for cell in cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env-id", default=VAULT, help="a vault task (comprl.envs.vault.VAULT_IDS)")
    parser.add_argument("--samples", type=int, default=4, help="extractor replies per won episode")
    parser.add_argument("--seed", type=int, default=0, help="torch seed, set before each learned variant")
    parser.add_argument("--examples", type=int, default=3, help="stored lessons printed per extractor")
    parser.add_argument(
        "--extractor-model", default=None, help="the learned extractor (comprl.config.MODELS; default the profile's)"
    )
    args = parser.parse_args()

    model = {"extractor.model": args.extractor_model}
    configs = {
        "free text": mechanism_config("cpu", env_id=args.env_id, **model),
        "lesson grammar": mechanism_config("cpu", env_id=args.env_id, **model, **{"extractor.lesson_grammar": True}),
    }
    config = configs["free text"]
    gate = config.bank.min_similarity
    queries, episodes = won_episodes(args.env_id)
    embedder = Embedder(config.bank.embedder)
    query_vectors = embedder.encode(queries)
    engine = HFEngine(*load_model(config.extractor.model, dtype=resolve_dtype(config.dtype, "cpu")))
    print(f"{args.env_id}: {len(episodes)} won episodes (one per vault) x {args.samples} replies; extractor "
          f"{config.extractor.model} ({config.extractor.style} style, temperature {config.extractor.temperature}, "
          f"{config.extractor.max_new_tokens} new tokens), embedder {config.bank.embedder}, gate {gate}, "
          f"seed {args.seed}", flush=True)

    columns, stored = {}, {}
    for name, variant in configs.items():
        print(name, flush=True)
        torch.manual_seed(args.seed)
        track = functools.partial(ExperienceTrack, engine, config=variant.extractor, task=args.env_id)
        columns[name], stored[name] = measure(track, episodes, args.samples, embedder, query_vectors, gate)
    print("scripted", flush=True)
    track = functools.partial(ScriptedTrack, config=config.extractor, task=args.env_id)
    columns["scripted"], stored["scripted"] = measure(track, episodes, args.samples, embedder, query_vectors, gate)

    print()
    print_side_by_side(columns)
    for name, table in stored.items():
        print(f"\n{name}: {args.examples} of its {len(table)} stored lessons (seed, states its secret, similarity)")
        for row in table.head(args.examples).itertuples():
            print(f"  seed {row.seed}  {str(row.secret):<5}  {row.similarity:.3f}  {row.text!r}")


if __name__ == "__main__":
    main()
