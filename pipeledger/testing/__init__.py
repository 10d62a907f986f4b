"""Test and benchmark helpers for pipeledger (not imported by the library itself)."""
