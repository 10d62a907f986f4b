"""Loads and models as one graph: which nodes a selector picks, and running them in
dependency order, independent branches side by side."""
