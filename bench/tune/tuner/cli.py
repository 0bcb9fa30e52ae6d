"""Autotuning of the GPU schedules' GeneratorParams (Python 3 standard library only).

The search spaces are declared in schedules/search_space.json. Tuning runs in rounds:

  here (Halide):   tune.py round      picks round k's candidates per model library, writes a
                                      CMake project listing them and builds ONE tuning binary
                                      (<work>/bin/fusedconv_tune)
  GPU machine:     fusedconv_tune --log LOG     times the default, every candidate and Li2018
  here:            tune.py ingest LOG records the measurements in <work>/state.json and writes
                                      schedules/tuned/<device slug>.json; then `round` again

Round 1 samples the constrained space (exhaustively when it is small); later rounds refine
around the best measured so far. A candidate once measured (or failed) is never rebuilt or
rerun. See bench/README.md, "Autotuning the GPU schedules".
"""

import argparse
import sys
from pathlib import Path

from .checks import cmd_check_aliases, cmd_check_space
from .ingest import cmd_ingest
from .messages import TuneError
from .paths import DEFAULT_WORK, SPACE_FILE
from .rounds import cmd_round
from .simulate import cmd_simulate
from .status import cmd_status
from .tuned import cmd_cmake_args, cmd_tuned


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default=str(DEFAULT_WORK),
                    help="tuning directory: state.json, gen/, build/, bin/ (default: %(default)s)")
    ap.add_argument("--space", default=str(SPACE_FILE), help="search space (default: %(default)s)")
    sub = ap.add_subparsers(dest="cmd", required=True)

    r = sub.add_parser("round", help="pick the next round's candidates and build the tuning binary")
    r.add_argument("--models", default="all", help="comma-separated models (p24,p25,p32,p83) or libraries")
    r.add_argument("--cap", type=int, default=24, help="candidates per model library per round (default 24)")
    r.add_argument("--seed", type=int, default=None, help="seed of the sampling (fixed when the state is created; default 0)")
    r.add_argument("--grid-max", type=int, default=32,
                   help="a constrained space of at most this many points is searched exhaustively (default 32)")
    r.add_argument("--top", type=int, default=3, help="refine around this many best points (default 3)")
    r.add_argument("--explore", type=float, default=0.25,
                   help="fraction of a refinement round sampled at random (default 0.25)")
    r.add_argument("--shape", action="append", help="tune MODEL at this input shape, e.g. p24=2,3,24,32,32")
    r.add_argument("--no-li2018", dest="li2018", action="store_false",
                   help="leave out the Li2018-autoscheduled libraries")
    r.add_argument("--drop-pending", action="store_true",
                   help="forget candidates generated but never measured instead of carrying them over")
    r.add_argument("--no-build", action="store_true", help="write the generated project only")
    r.add_argument("--smoke-cpu", action="store_true",
                   help="check the whole flow without a GPU: candidates compiled for the CPU (their gpu_* "
                        "params are then unused), batch-1 shapes, no Li2018; needs its own --work; its logs "
                        "are never written to schedules/tuned/")
    r.add_argument("-j", "--jobs", type=int, default=0, help="parallel build jobs (default: all cores)")
    r.set_defaults(func=cmd_round)

    i = sub.add_parser("ingest", help="record a tuning binary's log; write the tuned file")
    i.add_argument("logs", nargs="+", help="JSON-lines logs written by fusedconv_tune --log")
    i.add_argument("--tuned", help="tuned file to write (default schedules/tuned/<device slug>.json)")
    i.add_argument("--no-tuned", action="store_true", help="only update the state")
    i.set_defaults(func=cmd_ingest)

    s = sub.add_parser("status", help="what is measured, pending, best")
    s.set_defaults(func=cmd_status)

    t = sub.add_parser("tuned", help="(re)write the tuned file from the state")
    t.add_argument("--tuned", help="output (default schedules/tuned/<device slug>.json)")
    t.set_defaults(func=cmd_tuned)

    c = sub.add_parser("check-space", help="validate search_space.json against the schedules' headers")
    c.set_defaults(func=cmd_check_space)

    k = sub.add_parser("check-aliases",
                       help="check that each alias builds the library its value builds (runs the generator)")
    k.add_argument("--generator", required=True, help="the fusedconv_generators binary")
    k.add_argument("--target", required=True, help="Halide target, e.g. <FUSEDCONV_CUDA_TARGET>-no_runtime")
    k.set_defaults(func=cmd_check_aliases)

    a = sub.add_parser("cmake-args", help="print -DFUSEDCONV_PARAMS_<lib>=... for a tuned file")
    a.add_argument("file")
    a.set_defaults(func=cmd_cmake_args)

    m = sub.add_parser("simulate", help="write a SIMULATED log for the latest round (testing without a GPU)")
    m.add_argument("--log", required=True)
    m.add_argument("--device", default="Simulated GPU")
    m.set_defaults(func=cmd_simulate)

    args = ap.parse_args(argv)
    if getattr(args, "seed", 0) is None:
        args.seed = 0 if not (Path(args.work).resolve() / "state.json").exists() else None
    try:
        return args.func(args)
    except TuneError as e:
        print(f"tune.py: {e}", file=sys.stderr, flush=True)
        return 1
