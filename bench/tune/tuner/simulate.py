"""`tune.py simulate`: a fake log for the latest round, to exercise ingest and later rounds
without a GPU."""

import datetime
import json
import random

from .headers import reference_point
from .messages import TuneError, log
from .state import open_work
from .tuned import slug


def cmd_simulate(args):
    """A fake log for the pending candidates (to exercise ingest and later rounds without a GPU)."""
    space, _, st = open_work(args)
    if st is None or not st["rounds"]:
        raise TuneError("no round yet")
    rnd = st["rounds"][-1]
    rng = random.Random(f"simulate/{rnd['round']}")
    sid = f"simulated-{rnd['round']}-{rng.randrange(1 << 24):06x}"
    day = datetime.date.today().isoformat()
    recs = [{"type": "session", "session": sid, "device": args.device, "slug": slug(args.device),
             "date": day, "round": rnd["round"], "token": rnd["token"], "commit": rnd["commit"] + ("+dirty" if rnd.get("dirty") else ""),
             "source_hash": rnd["source_hash"], "reps": 20, "warmup": 3, "simulated": True}]

    def cost(s, p):  # smooth synthetic cost with a minimum away from the default
        c = 1.0
        for i, n in enumerate(s.names):
            vals = s.values[n]
            j = vals.index(p[n]) if p[n] in vals else 0
            target = (len(vals) - 1) * (0.3 + 0.4 * ((i * 7) % 3) / 2)
            c += 0.15 * (j - target) ** 2
        return round(c * (1 + 0.02 * rng.random()), 4)

    for lib, ids in rnd["candidates"].items():
        s, ls = space[lib], st["libs"][lib]
        base = {"type": "measurement", "session": sid, "round": rnd["round"], "lib": lib,
                "model": s.model, "shape": ls["shape"], "device": args.device, "date": day}
        ref = reference_point(s)
        dms = cost(s, ref)
        recs.append({**base, "system": "default", "id": "default", "params": ref, "status": "ok",
                     "median_ms": dms, "min_ms": dms * 0.98})
        for cid in ids:
            c = ls["candidates"][cid]
            if c["status"] != "pending":
                continue
            r = {**base, "system": "candidate", "id": cid, "params": c["params"]}
            if rng.random() < 0.05:
                r.update({"status": "error", "error": "simulated Halide error"})
            else:
                ms = cost(s, c["params"])
                r.update({"status": "ok", "median_ms": ms, "min_ms": ms * 0.98,
                          "default_median_ms": dms, "max_abs_diff": 0.0})
            recs.append(r)
        if (ls.get("li2018") or {}).get("build") == "ok":
            recs.append({**base, "system": "li2018", "id": "li2018", "params": {}, "status": "ok",
                         "median_ms": dms * 3, "min_ms": dms * 2.9, "default_median_ms": dms})
    with open(args.log, "w") as f:
        for r in recs:
            f.write(json.dumps(r) + "\n")
    log(f"wrote {len(recs)} SIMULATED records to {args.log}")
    return 0
