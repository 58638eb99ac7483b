"""Real stores: the embedded store with several processes on one data directory, a process
killed with SIGKILL and started again above what it handed out, and fleets on a real
PostgreSQL and a real etcd (started by conftest.py), and the client of real `idmint serve`s."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, List

import pytest

import idmint
from idmint import _idmint
from conftest import assert_unique, wait_for

KILLED_CHILD = """
import sys, idmint
minter = idmint.Minter(data_dir=sys.argv[1])
with open(sys.argv[2], "w", buffering=1) as out:
    while True:
        for i in minter.batch(500):
            out.write(f"{i}\\n")
        out.write(f"{minter.next()}\\n")
"""


def test_a_process_killed_with_sigkill_restarts_above_what_it_handed_out(tmp_path: Path) -> None:
    written = tmp_path / "ids.txt"
    child = subprocess.Popen([sys.executable, "-c", KILLED_CHILD, str(tmp_path / "data"), str(written)])
    try:
        def enough() -> bool:
            assert child.poll() is None, "the minting child exited by itself"
            return written.exists() and written.stat().st_size > 20 * 100_000
        wait_for(enough, "the child writing 100,000 IDs")
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    handed_out = [int(line) for line in written.read_text().split("\n")[:-1] if line]
    assert len(handed_out) >= 100_000
    assert_unique(handed_out, "before the kill")
    with idmint.Minter(data_dir=tmp_path / "data") as minter:
        assert minter.generator_id() == 0, "the same generator ID, taken again"
        first = minter.next()
        assert first > max(handed_out), "above every ID the killed process handed out"
        assert min(minter.batch(1_000)) > max(handed_out)


def fleet(tmp_path: Path, **store: Any) -> None:
    """Two minters on one store (two data directories, as two hosts) hold distinct generator
    IDs and never repeat; built again on a data directory after closing, a minter starts above
    everything before."""
    ids: List[int] = []
    settings = dict(store, window_ms=1_000)
    with idmint.Minter(data_dir=tmp_path / "a", **settings) as a, \
            idmint.Minter(data_dir=tmp_path / "b", **settings) as b:
        assert a.generator_id() is not None and b.generator_id() is not None
        assert a.generator_id() != b.generator_id()
        for _ in range(20):
            ids.extend(a.batch(500))
            ids.extend(b.batch(500))
            ids.append(a.next())
            ids.append(b.next())
        assert "generator" in repr(a)
    assert_unique(ids, f"two minters on {sorted(store)}")
    with idmint.Minter(data_dir=tmp_path / "a", **settings) as again:
        first = again.next()
        assert first not in set(ids)
        # The same generator ID resumes above its own mark.
        mine = [i for i in ids if idmint.decode(i, layout="snowflake")["fields"]["worker"]
                == idmint.decode(first, layout="snowflake")["fields"]["worker"]
                and idmint.decode(i, layout="snowflake")["fields"]["datacenter"]
                == idmint.decode(first, layout="snowflake")["fields"]["datacenter"]]
        assert all(first > i for i in mine)


def test_a_fleet_on_postgres(postgres_url: str, tmp_path: Path) -> None:
    fleet(tmp_path, postgres=postgres_url, lease_ttl=5)


def test_a_fleet_on_etcd(etcd_endpoint: str, tmp_path: Path) -> None:
    fleet(tmp_path, etcd=[etcd_endpoint], etcd_prefix=f"py-{os.getpid()}/")


def client_child(url: str, out: Any) -> None:
    with idmint.Client([url], prefetch=100) as client:
        out.put([client.next() for _ in range(300)] + client.batch(500))


def test_the_client_of_a_fleet(idmint_server: str) -> None:
    with idmint.Client([idmint_server], prefetch=100) as client:
        assert client.namespace == "default" and client.endpoints == [idmint_server]
        ids = [client.next() for _ in range(500)]
        ids.extend(client.batch(1_000))
        assert all(isinstance(i, int) for i in ids)
        assert all(a < b for a, b in zip(ids, ids[1:]))
        assert isinstance(client.next(format="hex"), str)
        # A forked child builds its own client: never its parent's prefetched IDs.
        ctx = multiprocessing.get_context("fork")
        out = ctx.Queue()
        children = [ctx.Process(target=client_child, args=(idmint_server, out)) for _ in range(2)]
        for c in children:
            c.start()
        ids.extend(client.next() for _ in range(300))
        for _ in children:
            ids.extend(out.get(timeout=120))
        for c in children:
            c.join(120)
            assert c.exitcode == 0
    assert_unique(ids, "a client and its forked children")
    with pytest.raises(idmint.ClosedError):
        client.next()
    with pytest.raises(idmint.UnavailableError):
        idmint.Client(["http://127.0.0.1:9"]).next()
