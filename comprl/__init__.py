"""comprl: a reproducibility kit for Complementary RL (arXiv 2603.17621)."""

__version__ = "0.1.0"
