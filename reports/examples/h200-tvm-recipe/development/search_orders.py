import sys, itertools, io, contextlib
sys.path.insert(0, ".dev/tvm05")
import try_orders, events
P = dict(BM=128, BN=128, BK=8, STAGES=int(sys.argv[1]) if len(sys.argv) > 1 else 3, GROUP=8)
seen = {}
for pro in (1, 2):
    for order in itertools.permutations(range(5)):
        stages = lambda S, pro=pro: [0, 0, S - pro, S - 1, S - 1]
        try:
            with contextlib.redirect_stderr(io.StringIO()):
                k = try_orders.build(stages, list(order), P)
            ev = events.events(k["source"])
        except Exception as e:
            ev = "FAIL " + str(e).splitlines()[-1][:80]
        seen.setdefault(ev, []).append((pro, order))
for ev, who in seen.items():
    print(len(who), who[:3], "::", ev.count("SYNC"), ev[:230])
