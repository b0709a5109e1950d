"""An exact in-memory nearest-neighbour index for the experience bank's live entries.

:class:`MemoryIndex` keeps one block of L2-normalised float32 vectors per task, in ascending id order, so a
search within one task scans only that task's vectors and a search over all tasks merges the per-task answers.
A block holds its vectors as the columns of one ``[dim, capacity]`` matrix: OpenBLAS streams that layout
faster than rows (``queries @ rows.T``) in the product with a small batch of queries; it also keeps them as rows
(twice the memory), from which the shortlist below is gathered ten times faster than from columns.
Similarity is the inner product of normalised vectors (cosine); equal similarities go to the lower id, as in the
bank's exact SQL search. A float32 matrix product rounds each score by an amount that depends on where the row
and the query sit in the product (BLAS kernels treat edge tiles, single queries and batches differently), so two
copies of one vector, or one pair searched alone and in a batch, can differ in the last bits. The product therefore
only shortlists: every row within the product's worst-case rounding (:func:`_shortlist_margin`) of the ``k``-th
best is scored again as a float64 sum of exact float32 products, the same arithmetic for every pair, rounded to
float32, and ranked on that. Answers thus do not depend on the batch, the block layout or the machine's kernels.

A batch of queries costs one matrix product per block (in chunks of queries that keep the score matrix near
:data:`CHUNK_BYTES`), followed by a top-k selection that avoids a partial sort over every score: the columns are
split into strided groups, each group's maximum (one vectorised ``maximum.reduce``) picks the ``k`` groups that
can hold the answer, and only those groups' scores are ranked; top-1 is an ``argmax`` (which keeps the first,
i.e. lowest-id, maximum). This keeps the search close to FAISS's exact inner-product index in speed, so the
index needs nothing beyond numpy.

Deleting an entry only marks its row (its score is masked before selection); the rows are compacted once a
quarter of a block is dead, so FIFO eviction of the oldest entries does not copy the block on every write.

The index does no locking of its own: the bank mutates it only while it holds its write lock and searches it
under its read lock, so a search never sees a change half made.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

CHUNK_BYTES = 32 * 2**20
"""Most bytes of one chunk of the query x rows score matrix (float32)."""

TILE_ROWS = 32768
"""Most rows (entries) one chunk of scores covers: a wider block is searched in tiles of rows whose answers are
merged, so that each pass over the vectors serves at least ``CHUNK_BYTES / 4 / TILE_ROWS`` (256) queries (a
matrix product of few queries with many rows is bound by reading the rows, once per chunk)."""

_GROUP = 32  # most columns per strided group in the top-k selection (a power of two, dividing every capacity)


def _normalised(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (a zero row stays zero), as a new C-contiguous float32 array."""
    vectors = np.array(vectors, dtype=np.float32, order="C", copy=True)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    np.divide(vectors, norms, out=vectors, where=norms > 0)
    return vectors


def _ranked(ids: np.ndarray, scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The first ``k`` of each row's ``ids`` and ``scores`` ordered by score descending, then by id ascending."""
    order = np.lexsort((ids, -scores), axis=-1)[:, :k]
    return np.take_along_axis(ids, order, 1), np.take_along_axis(scores, order, 1)


def _merged(parts: list[tuple[np.ndarray, np.ndarray]], k: int) -> tuple[np.ndarray, np.ndarray]:
    """The best ``k`` per row of several ranked ``(ids, scores)`` answers to the same queries."""
    if len(parts) == 1:
        return parts[0]
    return _ranked(np.concatenate([ids for ids, _ in parts], axis=1), np.concatenate([s for _, s in parts], axis=1), k)


def _exact_rows(scores: np.ndarray, rows: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_top_k` for the given rows by a stable sort of whole rows: slow, but exact with any ties."""
    chosen = scores[rows]
    cols = np.argsort(-chosen, axis=1, kind="stable")[:, :k]
    return cols, np.take_along_axis(chosen, cols, 1)


def _shortlist_margin(dim: int) -> float:
    """A bound on a float32 dot product's rounding error for two unit vectors of ``dim`` components, in any
    summation order (``dim`` roundings of at most 2^-24 relative each, on partial sums bounded by 1), doubled."""
    return 2.0 * dim * 2.0**-24


def _rescored(
    scores: np.ndarray, cols: np.ndarray, queries: np.ndarray, vectors: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best columns of each row of ``scores``, ranked on scores computed the same way for every pair (see
    the module docstring); ties go to the lower column.

    ``cols`` are each row's best columns by the float32 product, ``k + 1`` of them where the row has more than
    ``k`` (so that a near-tie at the cut shows), ``queries`` the rows' (normalised) queries and ``vectors`` the
    ``[width, dim]`` rows whose columns the product scored.
    """
    n = len(scores)
    margin = _shortlist_margin(vectors.shape[1])
    if cols.shape[1] > k:
        shown = np.take_along_axis(scores, cols[:, k - 1 : k + 1], 1)
        crowded = np.flatnonzero(shown[:, 1] >= shown[:, 0] - margin)  # the (k+1)-th could belong
        cols = cols[:, :k]
        if len(crowded):  # every column of those rows that could belong is scored again
            near = scores[crowded] >= np.take_along_axis(scores[crowded], cols[crowded, -1:], 1) - margin
            counts = near.sum(axis=1)
            rows, found = np.nonzero(near)
            wide = np.full((n, int(counts.max())), -1, dtype=np.intp)
            wide[:, :k] = cols
            wide[crowded] = -1
            wide[crowded[rows], np.arange(len(rows)) - np.repeat(np.cumsum(counts) - counts, counts)] = found
            cols = wide
    pairs = vectors[np.maximum(cols, 0)].astype(np.float64)  # [n, m, dim], contiguous along dim
    pairs *= queries.astype(np.float64)[:, None, :]
    exact = np.add.reduce(pairs, axis=2).astype(np.float32)
    exact[cols < 0] = -np.inf
    return _ranked(np.where(cols < 0, np.iinfo(np.intp).max, cols), exact, k)


def _top_k(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best columns of each row of ``scores`` (``[n, width]``) and their scores, best first.

    Ties go to the lower column. ``k`` must not exceed the number of finite scores in a row (masked columns hold
    ``-inf``). ``width`` must be a multiple of the group size chosen here, which the caller ensures by padding to
    a multiple of :data:`_GROUP`.
    """
    n, width = scores.shape
    if k == 1:
        cols = scores.argmax(axis=1)[:, None]  # argmax returns the first maximum: the lowest column
        return cols, np.take_along_axis(scores, cols, 1)
    group = _GROUP
    while group > 1 and width // group < 4 * k:  # enough groups that k of them are a small part of the row
        group //= 2
    n_groups = width // group
    if n_groups <= k:  # a tiny block: rank every column
        return _exact_rows(scores, np.arange(n), k)
    # Group g holds the columns g, g + n_groups, g + 2 n_groups, ...: its maximum is one elementwise reduction.
    maxima = np.maximum.reduce(scores.reshape(n, group, n_groups), axis=1)
    groups = np.argpartition(maxima, n_groups - k, axis=1)[:, n_groups - k :]
    # Every score at least the k-th best lies in a group whose maximum is at least the k-th best group maximum,
    # so these k groups hold the answer, unless more than k groups reach that threshold (ties: checked below).
    floor = np.take_along_axis(maxima, groups, 1).min(axis=1)
    crowded = (maxima >= floor[:, None]).sum(axis=1) > k
    # candidates[r, j * group + i] is the score of column groups[r, j] + i * n_groups
    candidates = scores.reshape(n, group, n_groups)[np.arange(n)[:, None], :, groups].reshape(n, k * group)
    best = np.argpartition(candidates, k * group - k, axis=1)[:, k * group - k :]
    best_scores = np.take_along_axis(candidates, best, 1)
    # A score equal to the k-th best left out of `best` would be a tie that argpartition settled arbitrarily.
    crowded |= (candidates >= best_scores.min(axis=1)[:, None]).sum(axis=1) > k
    best_cols = np.take_along_axis(groups, best // group, 1) + n_groups * (best % group)
    top_cols, top_scores = _ranked(best_cols, best_scores, k)
    rows = np.flatnonzero(crowded)
    if len(rows):
        top_cols[rows], top_scores[rows] = _exact_rows(scores, rows, k)
    return top_cols, top_scores


class _Block:
    """One task's entries: ids ascending, their normalised vectors (the columns of ``vectors``, ``[dim,
    capacity]``), and which rows (entries, i.e. columns of ``vectors``) are still live.

    Arrays have spare capacity (a multiple of :data:`_GROUP` rows), so appends are amortised and a search can pad
    its width to a whole number of groups without copying (the padding rows' scores are masked like dead rows').
    """

    def __init__(self, dim: int) -> None:
        self.ids = np.empty(0, dtype=np.int64)
        self.vectors = np.zeros((dim, 0), dtype=np.float32)
        self.rows = np.zeros((0, dim), dtype=np.float32)  # the same vectors as rows, for rescoring a shortlist
        self.live = np.zeros(0, dtype=bool)
        self.count = 0  # rows in use, dead ones included
        self.dead = np.empty(0, dtype=np.intp)  # rows in use whose entry was removed

    @property
    def live_count(self) -> int:
        return self.count - len(self.dead)

    @property
    def last_id(self) -> int | None:
        return int(self.ids[self.count - 1]) if self.count else None

    def append(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        end = self.count + len(ids)
        if end > len(self.ids):
            capacity = -(-max(end, 2 * len(self.ids)) // _GROUP) * _GROUP
            grown_ids = np.empty(capacity, dtype=np.int64)
            grown_vectors = np.zeros((self.vectors.shape[0], capacity), dtype=np.float32)
            grown_rows = np.zeros((capacity, self.vectors.shape[0]), dtype=np.float32)
            grown_live = np.zeros(capacity, dtype=bool)
            grown_ids[: self.count] = self.ids[: self.count]
            grown_vectors[:, : self.count] = self.vectors[:, : self.count]
            grown_rows[: self.count] = self.rows[: self.count]
            grown_live[: self.count] = self.live[: self.count]
            self.ids, self.vectors, self.rows, self.live = grown_ids, grown_vectors, grown_rows, grown_live
        self.ids[self.count : end] = ids
        self.vectors[:, self.count : end] = vectors.T
        self.rows[self.count : end] = vectors
        self.live[self.count : end] = True
        self.count = end

    def remove(self, rows: np.ndarray) -> None:
        self.live[rows] = False
        dead = np.flatnonzero(~self.live[: self.count])
        if 4 * len(dead) <= self.count:
            self.dead = dead
            return
        keep = np.flatnonzero(self.live[: self.count])
        kept = len(keep)
        self.ids[:kept] = self.ids[keep]
        self.vectors[:, :kept] = self.vectors[:, keep]
        self.rows[:kept] = self.rows[keep]
        self.live[:kept] = True
        self.live[kept : self.count] = False
        self.count = kept
        self.dead = np.empty(0, dtype=np.intp)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Ids and scores of the ``min(k, live)`` best rows for each (normalised) query, best first."""
        k = min(k, self.live_count)
        width = -(-self.count // _GROUP) * _GROUP
        tile = min(width, TILE_ROWS)
        chunk = max(1, min(len(queries), CHUNK_BYTES // (4 * tile)))
        buffer = np.empty(chunk * tile, dtype=np.float32)
        found_ids = np.empty((len(queries), k), dtype=np.int64)
        found_scores = np.empty((len(queries), k), dtype=np.float32)
        for start in range(0, len(queries), chunk):
            part = queries[start : start + chunk]
            found = []
            for left in range(0, self.count, tile):
                right = min(left + tile, width)
                scores = buffer[: len(part) * (right - left)].reshape(len(part), right - left)
                np.matmul(part, self.vectors[:, left:right], out=scores)
                scores[:, self.count - left :] = -np.inf  # padding
                dead = self.dead[(self.dead >= left) & (self.dead < right)] - left
                scores[:, dead] = -np.inf
                live = min(right, self.count) - left - len(dead)
                if live:
                    cols, _ = _top_k(scores, min(k + 1, live))
                    cols, values = _rescored(scores, cols, part, self.rows[left:right], min(k, live))
                    found.append((cols + left, values))
            cols, found_scores[start : start + chunk] = _merged(found, k)
            found_ids[start : start + chunk] = self.ids[cols]
        return found_ids, found_scores


class MemoryIndex:
    """Exact cosine nearest neighbours over a changing set of ``(id, task, vector)`` entries, held in memory.

    Within a task, ids must come in increasing order (each :meth:`add` above the task's ids so far), as the bank
    numbers its entries, so that row order is id order; vectors need not be normalised (they are, on the way in).
    Not thread-safe by itself: callers keep mutations apart from searches (the bank does so with its read/write
    lock).
    """

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._blocks: dict[str, _Block] = {}
        self._task_of: dict[int, str] = {}

    def __len__(self) -> int:
        return len(self._task_of)

    def add(self, task: str, ids: Sequence[int], vectors: np.ndarray) -> None:
        """Add entries of one task; ``vectors`` has one row per id. A ValueError leaves the index unchanged."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        vectors = np.asarray(vectors)
        if vectors.shape != (len(ids), self.dim):
            raise ValueError(f"vectors must have shape {(len(ids), self.dim)}, got {vectors.shape}")
        if not len(ids):
            return
        block = self._blocks[task] if task in self._blocks else _Block(self.dim)
        last = block.last_id
        if np.any(np.diff(ids) <= 0) or (last is not None and ids[0] <= last):
            raise ValueError(f"ids must increase, above the task's last id ({last}), got {ids.tolist()}")
        held = [entry_id for entry_id in ids.tolist() if entry_id in self._task_of]
        if held:
            raise ValueError(f"ids {held} are already in the index")
        block.append(ids, _normalised(vectors))
        self._blocks[task] = block
        self._task_of.update(dict.fromkeys(ids.tolist(), task))

    def remove(self, ids: Iterable[int]) -> None:
        """Remove entries by id; a KeyError for an id not held leaves the index unchanged."""
        by_task: dict[str, list[int]] = {}
        for entry_id in dict.fromkeys(ids):  # each id once
            if entry_id not in self._task_of:
                raise KeyError(f"id {entry_id} is not in the index")
            by_task.setdefault(self._task_of[entry_id], []).append(entry_id)
        for task, task_ids in by_task.items():
            block = self._blocks[task]
            block.remove(np.searchsorted(block.ids[: block.count], task_ids))
            if not block.live_count:
                del self._blocks[task]
            for entry_id in task_ids:
                del self._task_of[entry_id]

    def search(self, queries: np.ndarray, k: int, task: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` entries most similar to each query, within ``task`` (or all tasks if None).

        Returns ids (int64) and cosine similarities (float32), both ``[len(queries), min(k, matching entries)]``,
        each row best first, equal scores in increasing id order.
        """
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        queries = np.asarray(queries)
        if queries.ndim != 2 or queries.shape[1] != self.dim:
            raise ValueError(f"queries must have shape [n, {self.dim}], got {queries.shape}")
        queries = _normalised(queries)
        if task is None:
            blocks = list(self._blocks.values())
        else:
            blocks = [self._blocks[task]] if task in self._blocks else []
        if not blocks:
            return np.empty((len(queries), 0), dtype=np.int64), np.empty((len(queries), 0), dtype=np.float32)
        return _merged([block.search(queries, k) for block in blocks], k)
