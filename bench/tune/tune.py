#!/usr/bin/env python3
"""The command line of the GPU schedules' autotuner (Python 3 standard library only):
`python3 bench/tune/tune.py --help` lists its commands. The work is done by the package
tuner/ beside this file (tuner/__init__.py lists its modules); tuner/cli.py parses the
arguments. See bench/README.md, "Autotuning the GPU schedules"."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tuner.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
