"""How the report writes values and tables: numbers, versions, device facts, nested settings."""
from __future__ import annotations

import base64
import json
import math
from pathlib import Path

import pandas as pd


def format(value) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return str(int(value)) if value.is_integer() else f"{value:.4g}"
    return "" if value is None or value is pd.NA else str(value)


LONG_TEXT = 40  # characters: a column with longer cells wraps at a readable width, the others stay on one line


def table(df: pd.DataFrame) -> dict:
    rows = [[format(v) for v in row] for row in df.itertuples(index=False)]
    return {"columns": list(df.columns), "rows": rows,
            "long": [any(len(row[i]) > LONG_TEXT for row in rows) for i in range(len(df.columns))]}


def flatten(mapping: dict, prefix: str = "") -> list[tuple[str, str]]:
    """Nested dicts become dotted keys (peak_tflops.fp32), so every fact gets one line; empty facts are left out."""
    items = []
    for key, value in mapping.items():
        if isinstance(value, dict):
            items += flatten(value, f"{prefix}{key}.")
        elif format(value):
            items.append((f"{prefix}{key}", format(value)))
    return items


def cuda_version(number) -> str:
    """CUDA's integer versions as people write them: 13000 -> 13.0 (driver, runtime)."""
    return f"{int(number) // 1000}.{int(number) % 1000 // 10}"


def library_version(number) -> str:
    """cuBLAS's integer version: 130100 -> 13.1.0."""
    return f"{int(number) // 10000}.{int(number) % 10000 // 100}.{int(number) % 100}"


def device_name(device: dict) -> str:
    if device.get("device") == "cuda":
        return device.get("gpu", "")
    return f"CPU: {device.get('cpu') or device.get('gpu', '')}"


def readable_device(device: dict) -> dict:
    """A device's facts for people: versions written as releases, a CPU not called a GPU, no internal keys."""
    internal = ("device_reason", "gpu_uuid") if device.get("device") == "cpu" else ("device_reason",)
    facts = {k: v for k, v in device.items() if k not in internal}
    if device.get("device") == "cpu":
        facts.pop("gpu", None)
    for key in ("cuda_driver", "cuda_runtime"):
        if isinstance(facts.get(key), (int, float)):
            facts[key] = cuda_version(facts[key])
    versions = dict(facts.get("versions") or {})
    if isinstance(versions.get("cublas"), (int, float)):
        versions["cublas"] = library_version(versions["cublas"])
    facts["versions"] = versions
    for key in ("l2_bytes", "memory_bytes"):
        if isinstance(facts.get(key), (int, float)):
            facts[key.replace("_bytes", "")] = f"{facts.pop(key) / 2**20:.0f} MiB"
    return facts


def short(value) -> str:
    """A build fact for a table cell: JSON objects as 'key=value' lists (per size class on lines of their own)."""
    if isinstance(value, str) and value[:1] in "{[":
        try:
            value = json.loads(value)
        except ValueError:
            return value
    if isinstance(value, dict):
        if all(isinstance(v, dict) for v in value.values()):
            return "\n".join(f"{k}: {short(v)}" for k, v in value.items())  # one line per size class
        return " ".join(f"{k}={format(v)}" for k, v in value.items())
    if isinstance(value, list):
        return "; ".join(short(v) for v in value)
    return format(value)


COMPILERS = {"nvrtc": "NVRTC (CuPy)", "nvidia-cuda-nvrtc": "NVRTC wheel", "nvvm": "NVVM", "numba": "Numba",
             "cupy-cuda13x": "CuPy", "cupy-cuda12x": "CuPy", "apache-tvm": "TVM", "cublas": "cuBLAS"}


def data_uri(path: Path, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(Path(path).read_bytes()).decode('ascii')}"
