"""Running things: one scaffold for every kind of run (a load, a dry-run check, a quarantine
replay, a model), which owns the ledger run, the transaction, the words that say what a
failure left behind, and the hand-off of what the run did to the ledger."""
