"""Analyses of normalized leaderboards: outputs in, tables out.

* :mod:`~lbnorm.analysis.diff`: what a change did (``lbnorm diff``), and an output
  directory read as one side of a diff;
* :mod:`~lbnorm.analysis.impact`: what a suite change does to the same inputs
  (``lbnorm impact``), and bound overrides;
* :mod:`~lbnorm.analysis.health`: whether a benchmark is broken (``lbnorm health``);
* :mod:`~lbnorm.analysis.uncertainty`: which differences are real (intervals);
* :mod:`~lbnorm.analysis.correlation`: Spearman's rho and Kendall's tau, numpy only;
* :mod:`~lbnorm.analysis.align`: matching variants between two tables;
* :mod:`~lbnorm.analysis.render`: the Markdown the command line prints.

Import the module you need (``from lbnorm.analysis.diff import diff_results``);
this package imports none of them, so using one loads only what it needs.
"""

from __future__ import annotations
