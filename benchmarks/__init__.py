"""Benchmarks: ``./dev bench`` runs them all (``python -m benchmarks``)."""
