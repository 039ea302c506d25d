"""Budgeted SGD kernel SVM (Wang, Crammer & Vucetic, JMLR 2012).

Besides the estimator, three named modules hold the algorithm's state and steps (for tests
and for readers of the algorithm; their functions may change between releases):
``dkernel.svm.state`` (the learner's state, its conversions and the one coefficient rule),
``dkernel.svm.stream`` (the sequential fit's seeded visiting order over row blocks) and
``dkernel.svm.rounds`` (a distributed fit's shards, rounds and merges).
"""

from .. import load_model
from ._bsgd import BudgetedSVC, save_model

__all__ = ["BudgetedSVC", "load_model", "save_model"]
