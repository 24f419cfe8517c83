"""Dump every registered variant's canonical code text (what keys its tuning) to a JSON file."""
import json, sys
sys.path.insert(0, ".")
from kernels import registry
try:
    from gemmbench.tuning import codekey
except ImportError:
    from gemmbench import codekey
out = {key: codekey.canonical(v) for key, v in sorted(registry.load().items())}
json.dump(out, open(sys.argv[1], "w"), indent=0)
print(len(out), "variants")
