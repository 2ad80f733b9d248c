"""Widehouse benchmarks: ``python -m bench <name> [options]`` runs ``bench/<name>.py``."""
