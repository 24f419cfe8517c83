"""A plug-in table by name: every module of a package defines one entry, and a module outside the harness (named in
the config's variant_modules) registers its own. Workloads (gemmbench/workloads) and their views
(gemmbench/present/views) are two such tables."""
from __future__ import annotations

import importlib
import pkgutil


class Plugins(dict):
    """name -> entry (an object with a `name`)."""

    def __init__(self, what: str, hint: str):
        super().__init__()
        self.what, self.hint = what, hint  # a missing name's error says what is missing and how one is added

    def register(self, entry):
        self[entry.name] = entry
        return entry

    def load_package(self, package: str, path, attribute: str, register=None) -> None:
        """Register `attribute` of every module of `package` (its `__path__`), through `register` if given."""
        for module in pkgutil.iter_modules(path):
            (register or self.register)(getattr(importlib.import_module(f"{package}.{module.name}"), attribute))

    def get(self, name: str):
        if name not in self:
            raise KeyError(f"workload {name!r} {self.what} ({sorted(self)}; {self.hint})")
        return self[name]
