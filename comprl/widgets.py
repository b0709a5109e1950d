"""The old import path of the notebook widgets, kept for users' code: they live in :mod:`comprl.kit.widgets`."""

from comprl.kit.widgets import BankExplorer, LiveTrainingPlot

__all__ = ["BankExplorer", "LiveTrainingPlot"]
