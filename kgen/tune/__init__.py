"""Tuning: the variant space (Spec, configs), the default choice, the search and its GPU worker."""
