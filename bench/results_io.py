"""Shared reading and merging of bench/results/<slug>.json files.

The file is a JSON list of records. Each record has at least
problem, system, shape, median_ms, min_ms, max_abs_err_vs_fp64,
peak_device_mem_mb, device, date and commit; extra keys are kept as they are.

The scaling files (bench/results/scaling-<slug>.json: fusedconv_scaling, torch_scaling.py)
hold SCALING_KEYS instead, one record per replica count ("devices").

Writers merge: the existing list is loaded (when the file exists), records with
the same (problem, system, shape, devices) as a new one are dropped, the new ones are
appended, and the list is written back sorted by (problem, system) with
indent=1 (then devices). The C++ harnesses (bench/results.cpp) follow the same rule.

Standard library only: report.py imports this on machines without torch.
"""

import json
import os
import re
import subprocess
import tempfile

RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

REQUIRED_KEYS = (
    "problem",
    "system",
    "shape",
    "median_ms",
    "min_ms",
    "max_abs_err_vs_fp64",
    "peak_device_mem_mb",
    "device",
    "date",
    "commit",
)

SCALING_KEYS = (
    "problem",
    "system",
    "devices",
    "shape",
    "batch",
    "median_s",
    "samples_per_s",
    "efficiency",
    "device",
    "gpu_count",
    "date",
    "commit",
)


def slug(device_name):
    """'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3'."""
    s = re.sub(r"[^a-z0-9]+", "-", str(device_name).lower()).strip("-")
    return s or "unknown-device"


def default_results_path(device_name):
    return os.path.join(RESULTS_DIR, slug(device_name) + ".json")


def git_commit(repo=REPO_ROOT):
    """FUSEDCONV_COMMIT from the environment if set (a copy of the tree on
    another machine may carry a stale .git), else the short hash of HEAD in
    repo, or 'unknown'."""
    if os.environ.get("FUSEDCONV_COMMIT"):
        return os.environ["FUSEDCONV_COMMIT"]
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=repo,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            timeout=10,
            check=True,
        )
        h = out.stdout.strip()
        return h or "unknown"
    except Exception:
        return "unknown"


def _shape_key(shape):
    if shape is None:
        return None
    return tuple(int(d) for d in shape)


def record_key(rec):
    return (rec.get("problem"), rec.get("system"), _shape_key(rec.get("shape")), rec.get("devices"))


def load(path):
    """The list of records in path; [] when the file does not exist."""
    if not os.path.exists(path):
        return []
    with open(path, "r", encoding="utf-8") as f:
        data = json.load(f)
    if not isinstance(data, list):
        raise ValueError("%s: expected a JSON list of records, got %s" % (path, type(data).__name__))
    return data


def _sort_key(rec):
    return (str(rec.get("problem", "")), str(rec.get("system", "")), int(rec.get("devices", 0)))


def merge(existing, new):
    """existing minus records keyed like one in new, plus new, sorted (stable) by (problem, system,
    devices)."""
    new = list(new)
    new_keys = {record_key(r) for r in new}
    kept = [r for r in existing if record_key(r) not in new_keys]
    # Among the new records the last one of a key wins.
    dedup = {}
    for r in new:
        dedup[record_key(r)] = r
    merged = kept + [r for r in new if dedup[record_key(r)] is r]
    merged.sort(key=_sort_key)
    return merged


def validate(rec, required=REQUIRED_KEYS):
    missing = [k for k in required if k not in rec]
    if missing:
        raise ValueError("record %r lacks %s" % (record_key(rec), ", ".join(missing)))


def merge_into(path, records, required=REQUIRED_KEYS):
    """Merges records (each with the keys in required) into the file at path (created with its
    folder if absent); returns the merged list."""
    records = list(records)
    for r in records:
        validate(r, required)
        if r.get("shape") is not None:
            r["shape"] = [int(d) for d in r["shape"]]
    merged = merge(load(path), records)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    # Write to a temporary file in the same folder, then rename: a reader never sees half a file.
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(merged, f, indent=1)
            f.write("\n")
        os.chmod(tmp, 0o644)  # mkstemp creates 0600
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return merged
