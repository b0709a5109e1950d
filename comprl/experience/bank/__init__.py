"""The experience bank shared by the actor and the extractor.

:class:`ExperienceBank` stores entries, their embeddings and a log of every operation in one DuckDB file, and
answers nearest-neighbour queries (by default exactly, from an in-memory index kept in step with the file; or
HNSW via the ``vss`` extension; or brute force in SQL). :class:`Embedder` turns texts into vectors. Writes come as
:class:`Write` batches that are applied whole or not at all.
"""

from comprl.experience.bank.embedder import DEFAULT_MODEL, Embedder
from comprl.experience.bank.store import (
    BankFileError,
    BankLockedError,
    BankWriteError,
    Entry,
    ExperienceBank,
    Hit,
    NewEntry,
    Write,
)

__all__ = [
    "DEFAULT_MODEL",
    "BankFileError",
    "BankLockedError",
    "BankWriteError",
    "Embedder",
    "Entry",
    "ExperienceBank",
    "Hit",
    "NewEntry",
    "Write",
]
