"""Re-key the committed tuning records after a rename of kernels/ modules, on proof that each record's variant reads
the same to its compilers but for the modules' names.

  python rekey.py BEFORE.json AFTER.json RECORDS_DIR [EXTRA]
BEFORE/AFTER: each variant's canonical code (gemmbench's codekey.canonical) dumped at the tree before and after.
A record is re-keyed only where (1) its key stood before, (2) the canonical code after is the one before with the
old module names replaced by the new ones (canondiff.py's mapping), and (3) its new key is what tuning-check expects.
"""
import importlib.util, json, sys
from pathlib import Path
sys.path.insert(0, ".")
spec = importlib.util.spec_from_file_location("canondiff_rules", str(Path(__file__).with_name("canondiff.py")))
src = Path(spec.origin).read_text().split("same = diff = 0")[0].replace("a = json.load(open(sys.argv[1])); b = json.load(open(sys.argv[2]))", "")
extra = sys.argv[4] if len(sys.argv) > 4 else "[]"  # further [old, new] text replacements, each named in the log
rules = {}; exec(src.replace("sys.argv[3] if len(sys.argv) > 3 else \"[]\"", repr(extra)), rules)
before, after = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
try:
    from gemmbench.tuning import records as tune
except ImportError:
    from gemmbench import tune
from kernels import registry
known = registry.load()
root = Path(sys.argv[3]); done = 0
for path in sorted(root.glob("*/*/*/*.json")):
    record = json.loads(path.read_text()); name = path.relative_to(root); variant = known.get(record["variant"])
    now = tune.key(variant, record["mode"], record["settings"], record.get("compilers", {}))
    if now == record["key"]:
        print(f"{name}: current"); continue
    same = rules["norm"](before[record["variant"]]) == rules["canon"](after[record["variant"]])
    if not same:
        print(f"{name}: NOT re-keyed: its variant's code differs beyond module names"); continue
    text = path.read_text().replace(record["key"], now, 1)
    assert json.loads(text)["key"] == now
    path.write_text(text); done += 1
    print(f"{name}: re-keyed {record['key']} -> {now}: the same code but for module names" + (f" and {extra}" if extra != "[]" else ""))
print(f"{done} records re-keyed")
