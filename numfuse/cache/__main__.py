"""``python -m numfuse.cache info|clear [--stale]``: report on or empty the kernel cache."""

from __future__ import annotations

import argparse
import json
import sys

from ..backend import store
from . import _readable, clear, info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m numfuse.cache",
                                     description="numfuse's disk cache of compiled kernels")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("info", help="where the cache is, how many kernels, how big")
    remove = commands.add_parser("clear", help="remove the cached kernels")
    remove.add_argument("--stale", action="store_true",
                        help="remove only kernels of other versions or settings")
    arguments = parser.parse_args(argv)
    if arguments.command == "info":
        report = info()
        print(report)
        print(f"this process's key directory: {report.current}")
        print(json.dumps(store.cache_key_material(), indent=1, sort_keys=True))
        return 0
    freed = clear(stale_only=arguments.stale)
    print(f"removed {_readable(freed)} from {info().directory}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
