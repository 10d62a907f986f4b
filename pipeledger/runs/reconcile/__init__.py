"""Reconciliation: proof, window by window, that a target holds what its source holds
(:mod:`pipeledger.runs.reconcile.compare` says what that means and how it is measured)."""
