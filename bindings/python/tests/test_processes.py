"""Python's process models never duplicate: multiprocessing with fork, forkserver and spawn;
a minter built before a fork (gunicorn --preload, Celery prefork) beside a parent that goes
on minting; 8 threads on one minter. Each asserts 0 duplicates, and distinct generator IDs
among the processes that hold claims at once (a barrier keeps them all alive together).

The negative control builds the pre-fork minter with the fork hook off
(`_unsafe_no_fork_hook`, a build with IDMINT_NEGATIVE_CONTROLS=1 only): the children then
hand out their parent's prefetched IDs, and the same duplicate check catches it."""

from __future__ import annotations

import multiprocessing
import os
import threading
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest

import idmint
from idmint import _idmint
from conftest import assert_unique

PROCESSES = 4
PER_PROCESS = 20_000
BARRIER_TIMEOUT_S = 120


def mint(minter: idmint.Minter, n: int) -> List[int]:
    """n IDs: half one by one through next(), half through batch()."""
    ids = [minter.next() for _ in range(n // 2)]
    while len(ids) < n:
        ids.extend(minter.batch(min(1_000, n - len(ids))))
    return ids


def own_minter(data_dir: str, barrier: Any, out: Any) -> None:
    """A worker that builds its own minter on the shared data directory."""
    minter = idmint.Minter(data_dir=data_dir)
    ids = mint(minter, PER_PROCESS)
    out.put((os.getpid(), minter.generator_id(), ids))
    barrier.wait(BARRIER_TIMEOUT_S)  # every worker holds its claim until all have reported
    minter.close()


def collect(out: Any, n: int) -> List[Tuple[int, Optional[int], List[int]]]:
    return [out.get(timeout=BARRIER_TIMEOUT_S) for _ in range(n)]


def check(results: List[Tuple[int, Optional[int], List[int]]], what: str) -> None:
    pids = [pid for pid, _, _ in results]
    generators = [generator for _, generator, _ in results]
    assert len(set(pids)) == len(results), f"{what}: the workers are distinct processes"
    assert None not in generators, f"{what}: every worker holds a generator ID"
    assert len(set(generators)) == len(results), f"{what}: generator IDs {generators}"
    every = [i for _, _, ids in results for i in ids]
    assert len(every) == sum(len(ids) for _, _, ids in results) > 0
    assert_unique(every, what)


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_multiprocessing_start_methods(method: str, tmp_path: Path) -> None:
    ctx = multiprocessing.get_context(method)
    barrier, out = ctx.Barrier(PROCESSES), ctx.Queue()
    workers = [ctx.Process(target=own_minter, args=(str(tmp_path), barrier, out)) for _ in range(PROCESSES)]
    for w in workers:
        w.start()
    results = collect(out, PROCESSES)
    for w in workers:
        w.join(BARRIER_TIMEOUT_S)
        assert w.exitcode == 0
    check(results, f"multiprocessing {method}")


PRE_FORK: Dict[str, idmint.Minter] = {}


def inherited_minter(barrier: Any, out: Any) -> None:
    """A forked worker that uses the minter its parent built (gunicorn --preload)."""
    minter = PRE_FORK["minter"]
    ids = mint(minter, PER_PROCESS)
    out.put((os.getpid(), minter.generator_id(), ids))
    barrier.wait(BARRIER_TIMEOUT_S)
    minter.close()


def fork_beside_a_minting_parent(minter: idmint.Minter) -> List[Tuple[int, Optional[int], List[int]]]:
    """Forks PROCESSES workers from a parent that has minted (its buffer is full) and goes on
    minting while they run; returns the workers' results and the parent's."""
    parent_ids = mint(minter, 1_000)
    parent_ids.append(minter.next())  # a buffer of prefetched IDs at the fork
    PRE_FORK["minter"] = minter
    ctx = multiprocessing.get_context("fork")
    barrier, out = ctx.Barrier(PROCESSES + 1), ctx.Queue()
    workers = [ctx.Process(target=inherited_minter, args=(barrier, out)) for _ in range(PROCESSES)]
    for w in workers:
        w.start()
    parent_ids.extend(mint(minter, PER_PROCESS))
    results = collect(out, PROCESSES)
    barrier.wait(BARRIER_TIMEOUT_S)
    for w in workers:
        w.join(BARRIER_TIMEOUT_S)
        assert w.exitcode == 0
    results.append((os.getpid(), minter.generator_id(), parent_ids))
    return results


def test_a_minter_built_before_fork_claims_anew_in_each_child(tmp_path: Path) -> None:
    with idmint.Minter(data_dir=tmp_path) as minter:
        parent_generator = minter.generator_id()
        results = fork_beside_a_minting_parent(minter)
        assert minter.generator_id() == parent_generator, "the parent keeps its claim"
        assert len(minter.batch(100)) == 100, "and goes on minting"
    check(results, "pre-fork minter")


def test_negative_control_without_the_fork_hook_children_repeat_their_parent(tmp_path: Path) -> None:
    if not _idmint._negative_controls():
        if os.environ.get("CI") == "true":
            pytest.fail("CI builds the extension with IDMINT_NEGATIVE_CONTROLS=1")
        pytest.skip("a build without the negative controls (IDMINT_NEGATIVE_CONTROLS=1)")
    minter = idmint.Minter(data_dir=tmp_path, _unsafe_no_fork_hook=True)  # type: ignore[call-arg]
    results = fork_beside_a_minting_parent(minter)
    every = [i for _, _, ids in results for i in ids]
    with pytest.raises(AssertionError, match="duplicates"):
        assert_unique(every, "pre-fork minter without the fork hook")
    minter.close()


def refused_child(minter: idmint.Minter, out: Any) -> None:
    try:
        minter.next()
        out.put("minted")
    except idmint.ForkedError as e:
        out.put(str(e))


def test_on_fork_refuse_raises_in_the_child(tmp_path: Path) -> None:
    with idmint.Minter(data_dir=tmp_path, on_fork="refuse") as minter:
        minter.next()
        ctx = multiprocessing.get_context("fork")
        out = ctx.Queue()
        child = ctx.Process(target=refused_child, args=(minter, out))
        child.start()
        message = out.get(timeout=BARRIER_TIMEOUT_S)
        child.join(BARRIER_TIMEOUT_S)
        assert "is a fork of pid" in message and "OnFork::Refuse" in message
        assert minter.next() > 0, "the parent still mints"


def test_eight_threads_on_one_minter(tmp_path: Path) -> None:
    per_thread: List[List[int]] = [[] for _ in range(8)]
    start = threading.Barrier(8)
    with idmint.Minter(data_dir=tmp_path) as minter:
        def run(slot: int) -> None:
            start.wait(BARRIER_TIMEOUT_S)
            per_thread[slot] = mint(minter, PER_PROCESS)
        threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    for ids in per_thread:
        assert len(ids) == PER_PROCESS
        assert all(a < b for a, b in zip(ids, ids[1:])), "each thread's IDs increase"
    assert_unique([i for ids in per_thread for i in ids], "8 threads")
