"""`tune.py status`: per library what is measured, failed, pending, and the best so far."""

from .messages import log
from .state import open_work, shape_str


def print_status(st, space):
    log(f"device: {st['device'] or '(nothing measured yet)'}; rounds: {len(st['rounds'])}")
    for lib, ls in st["libs"].items():
        s = space.get(lib)
        c = ls["candidates"].values()
        ok = [x for x in c if x["status"] == "ok"]
        best = min(ok, key=lambda x: x["median_ms"]) if ok else None
        dm = min((d["median_ms"] for d in ls["defaults"] if d.get("median_ms") is not None), default=None)
        total = len(s.all_points()) if s else "?"
        li = ls.get("li2018") or {}
        li_s = (f"{li['median_ms']:.3f} ms" if li.get("status") == "ok" and li.get("median_ms") is not None
                else li.get("status") or ("build failed" if li.get("build") == "failed" else "-"))
        log(f"  {lib} {shape_str(ls['shape'])}: {len(ok)} ok, "
            f"{sum(1 for x in c if x['status'] == 'failed')} failed, "
            f"{sum(1 for x in c if x['status'] == 'pending')} pending of {total} valid; default "
            f"{'%.3f ms' % dm if dm is not None else '-'}; best "
            f"{'%.3f ms %s' % (best['median_ms'], s.key(best['params']) if s else best['params']) if best else '-'}; "
            f"li2018 {li_s}")


def cmd_status(args):
    space, _, st = open_work(args)
    if st is None:
        log("no state yet")
        return 0
    print_status(st, space)
    return 0
