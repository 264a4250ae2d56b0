"""Run every benchmark and print its figures."""

from __future__ import annotations

import sys

from benchmarks import bench_overhead


def main() -> int:
    bench_overhead.main(sys.argv[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
