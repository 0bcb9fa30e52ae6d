"""Which points a round measures: the grid of a small space, a seeded random sample, or the
neighbours of the best measured so far."""

from .state import built_point, known_keys, measured_points


def select_candidates(space_lib, ls, n, rng, ref_point, grid_max=32, top=3, explore=0.25):
    """Up to n new points (not the default, not already in the state) as [(params, mode, parent)].

    grid:   the whole constrained space has <= grid_max points: take them in order.
    random: nothing measured yet: a seeded random sample.
    refine: neighbours (one index step in one param, then in two) of the `top` best measured
            points, best first; `explore` of the round stays random.
    """
    if n <= 0:
        return []
    pts = space_lib.all_points()
    taken = known_keys(space_lib, ls) | {space_lib.key(ref_point)} | {
        space_lib.key(built_point(space_lib, d, ref_point)) for d in ls.get("defaults", [])}
    free = [p for p in pts if space_lib.key(p) not in taken]
    if not free:
        return []
    if len(pts) <= grid_max:
        return [(p, "grid", None) for p in free[:n]]
    best = measured_points(space_lib, ls, ref_point)
    if not best:
        return [(p, "random", None) for p in rng.sample(free, min(n, len(free)))]
    n_explore = int(round(n * explore))
    n_refine = n - n_explore
    chosen, keys = [], set()
    for steps in (1, 2):
        for _, seed_point, seed_id in best[:top]:
            for q in space_lib.neighbors(seed_point, steps):
                k = space_lib.key(q)
                if len(chosen) >= n_refine:
                    break
                if k in taken or k in keys or not space_lib.valid(q):
                    continue
                chosen.append((q, "refine", seed_id))
                keys.add(k)
    rest = [p for p in free if space_lib.key(p) not in keys]
    k = min(n - len(chosen), len(rest))
    chosen += [(p, "random", None) for p in rng.sample(rest, k)]
    return chosen
