"""Tuning: the committed records and what keys them (records.py, codekey.py), and the search that makes them
(search.py); the tune stage (stages/tune.py) decides which it takes."""
