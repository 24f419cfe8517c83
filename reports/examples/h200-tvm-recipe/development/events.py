import re, sys
def events(src):
    start = src.index("for (int ax7_0")
    depth = 0; out = []; i = src.index("{", start)
    body_end = None
    # find matching brace
    for j in range(i, len(src)):
        if src[j] == "{": depth += 1
        elif src[j] == "}":
            depth -= 1
            if depth == 0: body_end = j; break
    body = src[i:body_end]
    ffma = 0
    for line in body.splitlines():
        s = line.strip()
        ev = None
        if "__syncthreads" in s: ev = "SYNC"
        elif "wait_group_" in s: ev = "WAIT" + re.search(r"wait_group_(\d)", s).group(1)
        elif "commit_group" in s: ev = "COMMIT"
        elif "ptx_cp_async" in s: ev = "CP" + ("A" if "A_shared_ptr," in s else "B")
        elif "_local_ptr" in s and "= *(float4*)" in s and "shared_ptr" in s:
            m = re.search(r"\(\(ax7_0( \+ \d)?\) % \d\)", s)
            ev = "LDS" + s[2] + "(" + (m.group(1) or "+0").replace(" ", "") + ")" if m else "LDS" + s[2]
        elif "C_local_ptr" in s and "+" in s and "*" in s: ffma += 1; continue
        if ev:
            if ffma: out.append(f"FMA{ffma}"); ffma = 0
            if out and out[-1].startswith(ev.split("(")[0]) and ev.startswith(("CP", "LDS")) and out[-1].rstrip("x0123456789").rstrip("*") == ev:
                continue
            out.append(ev)
    if ffma: out.append(f"FMA{ffma}")
    # compress repeats
    comp = []
    for e in out:
        if comp and comp[-1][0] == e: comp[-1][1] += 1
        else: comp.append([e, 1])
    return " ".join(e if n == 1 else f"{e}*{n}" for e, n in comp)
if __name__ == "__main__":
    for f in sys.argv[1:]:
        print(f, ":", events(open(f).read()))
