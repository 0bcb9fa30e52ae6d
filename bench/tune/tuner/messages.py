"""What the tuner says: progress lines on stdout, and the error that ends a command (the
command line prints it as `tune.py: <message>` and exits with 1)."""


class TuneError(Exception):
    pass


def log(msg):
    print(msg, flush=True)
