"""The similarity gate of the vault tasks (issue 68): how near each vault's retrieval query is to the scripted
lesson of its own vault and to those of the other vaults, under the cpu profile's embedder (MiniLM) and extractor
style.

    nice -n 10 python benchmarks/vault_gate.py        # seconds

For each vault id: the table (rows: the query of a vault's episode, columns: the scripted lesson of a vault, as
:func:`comprl.kit.mechanism.scripted_similarity` writes it through the real env, parser and bank), the lowest
similarity to the own lesson, the highest to another's, their gap, and the task's ``bank.min_similarity`` in
:data:`comprl.kit.mechanism.TASK_SETTINGS` with whether it separates the two (shows each vault its own lesson and
never another's). ``VAULT_GATE`` was set from this script's output.
"""

from __future__ import annotations

import pandas as pd

from comprl.envs.vault import VAULT_IDS
from comprl.kit.mechanism import mechanism_config, scripted_similarity, similarity_gap


def main() -> None:
    rows = []
    for env_id in VAULT_IDS:
        config = mechanism_config("cpu", env_id=env_id)
        table = scripted_similarity(env_id, config)
        print(f"\n{env_id} ({config.bank.embedder}, {config.extractor.style} style)\n{table.round(3).to_string()}")
        own, other = similarity_gap(table)
        gate = config.bank.min_similarity
        rows.append({
            "env_id": env_id, "own_min": round(own, 4), "other_max": round(other, 4), "gap": round(own - other, 4),
            "gate": gate, "separates": None if gate is None else other < gate <= own,
        })
    print("\n" + pd.DataFrame(rows).to_string(index=False))


if __name__ == "__main__":
    main()
