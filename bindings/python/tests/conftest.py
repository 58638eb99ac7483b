"""Fixtures of the Python package's tests: real servers (PostgreSQL, etcd, `idmint serve`)
started on free loopback ports in temporary directories and stopped by their PID, as the Rust
tests' harness (crates/idmint-coord/src/testing/) starts them.

A missing program skips the tests that need it with the reason, except under CI=true, where it
fails them: CI never passes without running them."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Callable, Iterator, List, Optional

import pytest

ROOT = Path(__file__).resolve().parents[3]
START_TIMEOUT_S = 60.0


def missing(what: str) -> None:
    """Fails under CI=true, skips (with the reason) elsewhere."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} (CI=true: required)")
    pytest.skip(what)


def free_ports(n: int) -> List[int]:
    """n distinct free loopback ports (held open together while chosen)."""
    sockets = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = START_TIMEOUT_S) -> None:
    """Polls `condition` until it holds, failing with `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s} s")
        time.sleep(0.05)


def stop(process: "subprocess.Popen[bytes]") -> None:
    """Stops one process by its PID: SIGTERM, then SIGKILL after 10 s."""
    if process.poll() is None:
        os.kill(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def scratch(name: str) -> str:
    """A temporary directory, in memory (/dev/shm) when it can be."""
    base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    return tempfile.mkdtemp(prefix=f"idmint-py-{name}-", dir=base)


def postgres_bin() -> Optional[Path]:
    """The directory of initdb and postgres: IDMINT_POSTGRES_BIN, initdb's on PATH, or the
    newest /usr/lib/postgresql/*/bin."""
    need = ("initdb", "postgres", "pg_isready", "createdb")
    complete = lambda d: all((d / p).is_file() for p in need)  # noqa: E731
    if os.environ.get("IDMINT_POSTGRES_BIN"):
        d = Path(os.environ["IDMINT_POSTGRES_BIN"])
        return d if complete(d) else None
    initdb = shutil.which("initdb")
    if initdb and complete(Path(os.path.realpath(initdb)).parent):
        return Path(os.path.realpath(initdb)).parent
    versions = sorted(
        (int(p.name), p / "bin")
        for p in Path("/usr/lib/postgresql").glob("*")
        if p.name.isdigit() and complete(p / "bin")
    )
    return versions[-1][1] if versions else None


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A throwaway PostgreSQL server's URL (database `idmint`)."""
    bin_dir = postgres_bin()
    if bin_dir is None:
        missing("PostgreSQL (initdb, postgres) is not installed")
    assert bin_dir is not None
    user = None
    if os.geteuid() == 0:  # initdb refuses root
        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            missing("a `postgres` user (initdb refuses to run as root)")
    base = scratch("pg")
    data, sockets = os.path.join(base, "data"), os.path.join(base, "sockets")
    os.makedirs(sockets)
    if user is not None:
        for path in (base, sockets):
            os.chown(path, user.pw_uid, user.pw_gid)
    as_user = {"user": user.pw_uid, "group": user.pw_gid} if user is not None else {}
    env = dict(os.environ, HOME=base)
    log = open(os.path.join(base, "log"), "wb")
    subprocess.run(
        [str(bin_dir / "initdb"), "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8",
         "--locale=C.UTF-8", "-N"],
        check=True, stdout=log, stderr=log, env=env, cwd=base, **as_user,  # type: ignore[arg-type]
    )
    port = free_ports(1)[0]
    server = subprocess.Popen(
        [str(bin_dir / "postgres"), "-D", data, "-h", "127.0.0.1", "-p", str(port), "-k", sockets],
        stdout=log, stderr=log, stdin=subprocess.DEVNULL, env=env, cwd=base, **as_user,  # type: ignore[arg-type]
    )
    try:
        ready = lambda: subprocess.run(  # noqa: E731
            [str(bin_dir / "pg_isready"), "-q", "-t", "1", "-h", "127.0.0.1", "-p", str(port)]
        ).returncode == 0 or server.poll() is not None
        wait_for(ready, "postgres accepting connections")
        assert server.poll() is None, f"postgres exited; see {base}/log"
        subprocess.run(
            [str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "idmint"],
            check=True, stdout=log, stderr=log,
        )
        yield f"postgresql://postgres@127.0.0.1:{port}/idmint"
    finally:
        stop(server)
        log.close()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def etcd_endpoint() -> Iterator[str]:
    """A throwaway one-member etcd cluster's client URL."""
    program = os.environ.get("IDMINT_ETCD_BIN") or shutil.which("etcd")
    if program is None:
        missing("etcd is not installed")
    assert program is not None
    base = scratch("etcd")
    client_port, peer_port = free_ports(2)
    client, peer = f"http://127.0.0.1:{client_port}", f"http://127.0.0.1:{peer_port}"
    log = open(os.path.join(base, "log"), "wb")
    server = subprocess.Popen(
        [program, "--name=m0", f"--data-dir={base}/m0", f"--listen-client-urls={client}",
         f"--advertise-client-urls={client}", f"--listen-peer-urls={peer}",
         f"--initial-advertise-peer-urls={peer}", f"--initial-cluster=m0={peer}",
         "--initial-cluster-state=new", f"--initial-cluster-token=idmint-py-{os.getpid()}",
         "--log-level=warn"],
        stdout=log, stderr=log, stdin=subprocess.DEVNULL,
    )
    try:
        def healthy() -> bool:
            if server.poll() is not None:
                return True
            try:
                with urllib.request.urlopen(f"{client}/health", timeout=1) as answer:
                    return b'"health":"true"' in answer.read()
            except OSError:
                return False
        wait_for(healthy, "etcd healthy")
        assert server.poll() is None, f"etcd exited; see {base}/log"
        yield client
    finally:
        stop(server)
        log.close()
        shutil.rmtree(base, ignore_errors=True)


def idmint_bin() -> Optional[Path]:
    """The `idmint` binary: IDMINT_BIN, or the workspace's debug build."""
    if os.environ.get("IDMINT_BIN"):
        return Path(os.environ["IDMINT_BIN"])
    for profile in ("debug", "release"):
        candidate = ROOT / "target" / profile / "idmint"
        if candidate.is_file():
            return candidate
    return None


@pytest.fixture
def idmint_server(tmp_path: Path) -> Iterator[str]:
    """An `idmint serve` on a free port (its own data directory); its URL."""
    program = idmint_bin()
    if program is None:
        missing("the idmint binary (cargo build -p idmint-cli, or IDMINT_BIN)")
    assert program is not None
    port = free_ports(1)[0]
    log = open(tmp_path / "serve.log", "wb")
    server = subprocess.Popen(
        [str(program), "serve", "--listen", f"127.0.0.1:{port}", "--data-dir",
         str(tmp_path / "serve-data")],
        stdout=log, stderr=log, stdin=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        def ready() -> bool:
            if server.poll() is not None:
                return True
            try:
                with urllib.request.urlopen(f"{url}/v1/next", timeout=1):
                    return True
            except OSError:
                return False
        wait_for(ready, "idmint serve answering")
        assert server.poll() is None, f"idmint serve exited; see {tmp_path}/serve.log"
        yield url
    finally:
        stop(server)
        log.close()


def assert_unique(ids: List[object], what: str) -> None:
    """No ID twice among `ids`."""
    seen = set()
    duplicates = [i for i in ids if i in seen or seen.add(i)]  # type: ignore[func-returns-value]
    assert not duplicates, f"{what}: {len(duplicates)} duplicates, e.g. {duplicates[:3]}"
