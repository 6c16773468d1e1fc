"""Checks: validation against fp64, benchmarks, static checks, loading emitted files."""
