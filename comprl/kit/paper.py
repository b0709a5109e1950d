"""The paper's reported numbers (Complementary RL, arXiv 2603.17621), for tables that put ours next to them.

Only numbers are kept here, with the table or figure they come from; ``comprl.kit.report.task_table`` builds our
side of each comparison and ``comprl reproduce`` writes both, with the difference, into ``results/REPORT.md``.
"""

from __future__ import annotations

TABLE_ROWS: tuple[tuple[str, str, bool], ...] = (
    ("Baseline GRPO (no experience)", "baseline", False),
    ("Static online experience, eval with exp.", "static", True),
    ("Static online experience, eval without exp.", "static", False),
    ("Experience only (actor frozen)", "exp_only", True),
    ("Complementary RL, eval with exp.", "comp_rl", True),
    ("Complementary RL, eval without exp.", "comp_rl", False),
)
"""The rows of the paper's Table 1: (label, method, whether the final evaluation retrieves experience)."""

TABLE_1_3_TASK: dict[str, dict[str, float]] = {
    "Baseline GRPO (no experience)": {"room": 0.68, "webshop": 0.81, "alfworld": 0.72, "avg": 0.75},
    "Static online experience, eval with exp.": {"room": 0.41, "webshop": 0.67, "alfworld": 0.69, "avg": 0.59},
    "Static online experience, eval without exp.": {"room": 0.39, "webshop": 0.59, "alfworld": 0.64, "avg": 0.54},
    "Experience only (actor frozen)": {"room": 0.49, "webshop": 0.37, "alfworld": 0.13, "avg": 0.33},
    "Complementary RL, eval with exp.": {"room": 0.78, "webshop": 0.87, "alfworld": 0.82, "avg": 0.82},
    "Complementary RL, eval without exp.": {"room": 0.75, "webshop": 0.84, "alfworld": 0.74, "avg": 0.78},
}
"""Table 1: final success of the 3-task run (Room + WebShop + ALFWorld), per task and averaged."""

TASK_SCALING_GAIN: dict[int, float] = {3: 0.066, 6: 0.081}
"""Task-scaling figure: Complementary RL's average success over the baseline's, by number of tasks."""

SINGLE_TASK_SPEEDUP = 1.3
"""Single-task figures: Complementary RL's success is about 1.3x the baseline's on Room and on ALFWorld."""

FEWER_ACTIONS: dict[str, float] = {"room": 1.5, "alfworld": 2.0}
"""Single-task figures: the baseline's actions per episode over Complementary RL's."""

LARGER_EXTRACTOR_GAIN = 0.05
"""Extractor-size ablation: a Qwen3-30B-A3B extractor instead of Qwen3-4B adds about 5 points of average success."""


ABLATIONS: dict[str, str] = {
    "no_merge": "lower",
    "no_search_and_ask": "lower",
    "no_split_advantages": "collapse",
    "shared_weights": "collapse",
}
"""Ablations (figures and text only): without Merge or without search_and_ask the final success on Room is lower
than the full method's; with one advantage group over both halves, and with the actor's own model as extractor
(self-distillation), training collapses (the latter late)."""
