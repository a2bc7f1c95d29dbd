"""Benchmarks with their own runner: python -m benchmarks (see __main__.py)."""
