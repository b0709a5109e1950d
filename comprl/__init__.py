"""comprl: a reproducibility kit for Complementary RL (arXiv 2603.17621).

The public API the notebooks use::

    config = comprl.make_config("cpu", env_id="comprl/Room-Ultimate-5x5-v0")
    run = comprl.run_experiment(config, output_dir="results/demo")
    comprl.summary_table(comprl.load_metrics([run]))
"""

from comprl.config import METHODS, PROFILES, ExperimentConfig, make_config
from comprl.llm import load_model
from comprl.runs import Run, load_metrics, plot_learning_curves, summary_table
from comprl.trainers.loop import run_experiment

__version__ = "0.1.0"

__all__ = [
    "METHODS",
    "PROFILES",
    "ExperimentConfig",
    "Run",
    "load_metrics",
    "load_model",
    "make_config",
    "plot_learning_curves",
    "run_experiment",
    "summary_table",
]
