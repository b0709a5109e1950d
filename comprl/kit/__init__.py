"""The reproduction kit: what researchers drive from the notebooks and the command line, around the method.

- :mod:`~comprl.kit.cli`: the ``comprl`` command; :mod:`~comprl.kit.notebook_runner` executes a notebook headless.
- :mod:`~comprl.kit.plans`: the run plan of every paper notebook, one place for the notebooks and the reproduction.
- :mod:`~comprl.kit.reproduce`: every notebook in order, then ``results/REPORT.md``; :mod:`~comprl.kit.planner`
  validates its configs and plans memory, GPUs, tokens and time.
- :mod:`~comprl.kit.parallel`: several runs at once, one core each; :mod:`~comprl.kit.latency`: the overhead of
  the experience track on rollouts (notebook 05).
- :mod:`~comprl.kit.report`: the paper's tables and figures from metric rows; :mod:`~comprl.kit.paper`: the
  paper's reported numbers.
- :mod:`~comprl.kit.widgets`: the bank explorer and the live training plot of the notebooks.

The kit imports the library (:mod:`comprl.loop`, :mod:`comprl.runs`, :mod:`comprl.config`...); nothing in the
library imports the kit. This package imports none of its modules up front, so ``import comprl.kit`` is cheap.
"""
