"""Running a build step or the generator: its output goes to ours, a failure is a TuneError."""

import subprocess
import sys

from .messages import TuneError, log


def run_cmd(cmd, what, capture=False):
    """Runs cmd, its output going to ours; with capture, also returns it (and a failure is the
    caller's to handle)."""
    log("$ " + " ".join(str(c) for c in cmd))
    try:
        if not capture:
            r = subprocess.run([str(c) for c in cmd], text=True)
            if r.returncode != 0:
                raise TuneError(f"{what} failed (exit {r.returncode})")
            return r
        p = subprocess.Popen([str(c) for c in cmd], text=True, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT)
    except OSError as e:  # a missing or non-executable program: an error, not a traceback
        raise TuneError(f"{what}: cannot run {cmd[0]}: {e.strerror or e}") from None
    lines = []
    for line in p.stdout:
        lines.append(line)
        sys.stdout.write(line)
        sys.stdout.flush()
    p.wait()
    return subprocess.CompletedProcess(cmd, p.returncode, "".join(lines), "")
