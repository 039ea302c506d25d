"""Budgeted SGD kernel SVM (Wang, Crammer & Vucetic, JMLR 2012)."""

from .. import load_model
from ._bsgd import BudgetedSVC, save_model

__all__ = ["BudgetedSVC", "load_model", "save_model"]
