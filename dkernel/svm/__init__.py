"""Budgeted SGD kernel SVM (Wang, Crammer & Vucetic, JMLR 2012)."""

from ._bsgd import BudgetedSVC, load_model, save_model

__all__ = ["BudgetedSVC", "load_model", "save_model"]
