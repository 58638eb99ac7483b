"""idmint's Minter against the Python ID packages, in one run: ns per call of `next()` (one
thread), and IDs/s of `Minter.batch(10_000)` against its namespace's ceiling. Not a test: run
it on a release build (`maturin develop --release`) with the peers installed:

    pip install snowflake-id sonyflake-py uuid_utils uuid6 python-ulid typeid-python
    python bindings/python/bench/bench.py [--markdown]

Each peer missing is left out of the table, said so on stderr."""

from __future__ import annotations

import functools
import os
import platform
import subprocess
import sys
import tempfile
import time
from typing import Callable, List, Optional, Tuple

import idmint

CALL_SECONDS = 1.0
BATCH_SECONDS = 3.0
ROUNDS = 5

# A 63-bit layout whose ceiling (2^20 IDs per ms per generator) is far above any call rate:
# next() is measured without waiting for the clock.
WIDE = {
    "custom_layout": {
        "name": "wide",
        "bits": 63,
        "epoch": "2024-01-01T00:00:00Z",
        "fields": [
            {"name": "timestamp", "bits": 41, "role": "time"},
            {"name": "worker", "bits": 2, "role": "node"},
            {"name": "sequence", "bits": 20, "role": "sequence"},
        ],
    }
}
WIDE_CEILING = (1 << 20) * 1000


def ns_per_call(call: Callable[[], object], seconds: float = CALL_SECONDS) -> float:
    """The best of ROUNDS rounds of `seconds` each, in ns per call (loops of 1,000 calls)."""
    best = float("inf")
    for _ in range(ROUNDS):
        n, start = 0, time.perf_counter()
        deadline = start + seconds
        while True:
            for _ in range(1_000):
                call()
            n += 1_000
            now = time.perf_counter()
            if now >= deadline:
                break
        best = min(best, (now - start) / n * 1e9)
    return best


def batch_rate(minter: idmint.Minter, seconds: float = BATCH_SECONDS) -> float:
    """IDs/s of batch(10_000) sustained over `seconds` (the best of ROUNDS rounds)."""
    best = 0.0
    for _ in range(ROUNDS):
        n, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            n += len(minter.batch(10_000))
        best = max(best, n / (time.perf_counter() - start))
    return best


def peers() -> List[Tuple[str, Callable[[], object], str, str]]:
    """(name, call, safe across processes, safe across hosts) of each installed peer."""
    found: List[Tuple[str, Callable[[], object], str, str]] = []
    try:
        from snowflake import SnowflakeGenerator

        gen = SnowflakeGenerator(1)
        found.append(("snowflake-id `next(SnowflakeGenerator(1))`", gen.__next__,
                      "no: the instance ID is yours to hand out", "no: the same"))
    except ImportError:
        print("snowflake-id is not installed", file=sys.stderr)
    try:
        from sonyflake import SonyFlake

        flake = SonyFlake()
        found.append(("sonyflake-py `SonyFlake().next_id()`", flake.next_id,
                      "no: the machine ID is the host's private IP", "yes if the low 16 bits of the hosts' IPs differ"))
    except ImportError:
        print("sonyflake-py is not installed", file=sys.stderr)
    try:
        import uuid_utils

        found.append(("uuid_utils `uuid7()`", uuid_utils.uuid7, "random: no worker ID", "random: no worker ID"))
    except ImportError:
        print("uuid_utils is not installed", file=sys.stderr)
    try:
        import uuid6

        found.append(("uuid6 `uuid7()`", uuid6.uuid7, "random: no worker ID", "random: no worker ID"))
    except ImportError:
        print("uuid6 is not installed", file=sys.stderr)
    try:
        from ulid import ULID

        found.append(("python-ulid `ULID()`", ULID, "random: no worker ID", "random: no worker ID"))
    except ImportError:
        print("python-ulid is not installed", file=sys.stderr)
    try:
        from typeid import TypeID

        found.append(("typeid-python `TypeID(prefix='user')`", functools.partial(TypeID, prefix="user"),
                      "random: no worker ID", "random: no worker ID"))
    except ImportError:
        print("typeid-python is not installed", file=sys.stderr)
    return found


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def commit() -> str:
    try:
        here = os.path.dirname(os.path.abspath(__file__))
        return subprocess.run(["git", "-C", here, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> None:
    rows: List[Tuple[str, float, str, str]] = []
    safe = ("yes: a claimed generator ID", "yes: claims in Postgres or etcd")
    with tempfile.TemporaryDirectory() as data_dir:
        # Two minters on one data directory, each namespace the default of its own, so that
        # `next` is called as a bound method with no argument, as the peers are.
        with idmint.Minter(data_dir=data_dir, namespaces={"wide": WIDE}) as wide, \
                idmint.Minter(data_dir=data_dir) as snowflake:
            rows.append(("idmint `Minter.next()` (layout `wide`)", ns_per_call(wide.next), *safe))
            rows.append(("idmint `Minter.next()` (snowflake)", ns_per_call(snowflake.next), *safe))
            for name, call, processes, hosts in peers():
                rows.append((name, ns_per_call(call), processes, hosts))
            snowflake_ceiling = idmint.explain("snowflake")["capacity"]["ids_per_second_per_generator"]
            batches = [
                ("snowflake", batch_rate(snowflake), snowflake_ceiling),
                ("wide", batch_rate(wide), WIDE_CEILING),
            ]
    reference = next((ns for name, ns, _, _ in rows if name.startswith("uuid_utils")), None)
    print(f"date {time.strftime('%Y-%m-%d', time.gmtime())}, commit {commit()}, CPU {cpu_model()}, "
          f"Python {platform.python_version()}, one thread\n")
    print("| call | ns per call | vs `uuid_utils.uuid7()` | worker ID safe across processes | across hosts |")
    print("| --- | ---: | ---: | --- | --- |")
    for name, ns, processes, hosts in rows:
        ratio = f"{ns / reference:.2f}x" if reference else "-"
        print(f"| {name} | {ns:,.0f} | {ratio} | {processes} | {hosts} |")
    print()
    print("| `Minter.batch(10_000)` | IDs/s | ceiling per generator | of the ceiling |")
    print("| --- | ---: | ---: | ---: |")
    for namespace, rate, ceiling in batches:
        print(f"| {namespace} | {rate / 1e6:,.2f} M | {ceiling / 1e6:,.3f} M | {rate / ceiling:.1%} |")


if __name__ == "__main__":
    main()
