"""JSON files the stages and workers share: written whole or not at all, so a reader never sees half of one; and
the short digest that keys them."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path


def read_json(path) -> dict:
    return json.loads(Path(path).read_text())


def write_json(path, data) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f"{path.suffix}.{os.getpid()}.tmp")  # per process: two writers never share one
    tmp.write_text(json.dumps(data, indent=1, default=str))
    tmp.replace(path)


def digest(data) -> str:
    """A short content hash of plain JSON data (a tuning record's key, a timed point's key)."""
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]
