import json, sys, re, difflib
a = json.load(open(sys.argv[1])); b = json.load(open(sys.argv[2]))
ren = [(r"kernels\.cupy\.tensorcore\.rungs", "kernels.cupy.tensorcore.variants"), (r"kernels\.cupy\.rungs", "kernels.cupy.variants"),
       (r"kernels\.cupy\.rung\b", "kernels.cupy.nvrtc"), (r"kernels\.numba\.ladder", "kernels.numba.variants"),
       (r"kernels\.tvm\.family", "kernels.tvm.variants"), (r"kernels\.generated", "kernels.machine_code"),
       (r"python family\.py", "python variants.py")] + [(re.escape(x), y) for x, y in json.loads(sys.argv[3] if len(sys.argv) > 3 else "[]")]
ATTRS = ("digest", "ARCH", "machine_code", "nvrtc_version", "PROBE_SHAPES", "included", "twice", "symbols_renamed", "headers")
NAMES = [("ImportFrom(module='kernels', names=[alias(name='generated')]", "ImportFrom(module='kernels', names=[alias(name='machine_code')]"),
         ("alias(name='rung', asname='cupy_rung')", "alias(name='nvrtc')"), ("Name(id='cupy_rung')", "Name(id='nvrtc')"),
         ("ImportFrom(module='kernels.cupy', names=[alias(name='rung')]", "ImportFrom(module='kernels.cupy', names=[alias(name='nvrtc')]"),
         ("Attribute(value=Name(id='rung'), attr='Rung'", "Attribute(value=Name(id='nvrtc'), attr='Rung'")] + [
         (f"Attribute(value=Name(id='generated'), attr='{a}'", f"Attribute(value=Name(id='machine_code'), attr='{a}'") for a in ATTRS]
def norm(t):
    for x, y in ren: t = re.sub(x, y, t)
    for x, y in NAMES: t = t.replace(x, y)  # a module's import name, where the syntax says it is the module
    lines = t.splitlines()
    t = "\n".join(lines)
    return "\n".join(sorted(t.splitlines()))
def canon(t):
    return "\n".join(sorted(t.splitlines()))
same = diff = 0; residue = {}
for k in sorted(set(a) | set(b)):
    if a.get(k) == b.get(k): same += 1; continue
    if norm(a[k]) == canon(b[k]): diff += 1; continue
    print("DIFFERS beyond module renames:", k)
    for x, y in zip(norm(a[k]).splitlines(), canon(b[k]).splitlines()):
        if x != y:
            sm = difflib.SequenceMatcher(None, x, y, autojunk=False)
            for op, i1, i2, j1, j2 in sm.get_opcodes():
                if op != "equal": residue[(x[max(0,i1-40):i2+10], y[max(0,j1-40):j2+10])] = k
print(f"identical: {same}, identical but for module names: {diff}")
for (x, y), k in list(residue.items())[:30]: print(k, "|", x, " ==> ", y)
