"""Presenting results: tidy tables, seaborn figures and the self-contained HTML report."""
