"""idmint: unique IDs that never repeat, in your own process or from a fleet of servers.

- :class:`Minter`: the embedded, fleet-safe minter (a data directory shared by the processes
  of a host, or Postgres for a fleet); safe across ``fork``, ``forkserver``, ``spawn`` and
  threads.
- :class:`Client`: the client of a fleet of ``idmint serve``.
- :func:`decode`, :func:`layouts`, :func:`explain`, :func:`obfuscate`, :func:`reveal`: what
  the ``idmint`` CLI does with IDs, as functions.
- :mod:`idmint.errors`: the exceptions, all under :class:`Error`.
"""

from __future__ import annotations

import datetime as _datetime
import json as _json
import os as _os
import uuid as _uuid
from typing import Any, Dict, Optional, Union

from . import _idmint
from ._idmint import Client, Minter, layouts, obfuscate, reveal
from .errors import (
    ClientError,
    ClockError,
    ClosedError,
    ConfigError,
    DecodeError,
    Error,
    ExhaustedError,
    ForkedError,
    NamespaceError,
    RequestError,
    StoreError,
    UnavailableError,
)

__all__ = [
    "Minter",
    "Client",
    "decode",
    "layouts",
    "explain",
    "obfuscate",
    "reveal",
    "Error",
    "ConfigError",
    "NamespaceError",
    "StoreError",
    "ClockError",
    "ExhaustedError",
    "UnavailableError",
    "ForkedError",
    "ClosedError",
    "DecodeError",
    "RequestError",
    "ClientError",
]

__version__ = "0.1.0"

_EPOCH = _datetime.datetime(1970, 1, 1, tzinfo=_datetime.timezone.utc)


def _time(ms: Optional[int]) -> Optional[_datetime.datetime]:
    return None if ms is None else _EPOCH + _datetime.timedelta(milliseconds=ms)


def decode(
    id: Union[int, str, _uuid.UUID],
    layout: str = "auto",
    type_prefix: Optional[str] = None,
) -> Dict[str, Any]:
    """What an ID is, as ``idmint decode`` shows it.

    ``id`` is an ``int``, a ``uuid.UUID`` or text (a TypeID, a ULID, ...). With
    ``layout="auto"`` the format is recognised (idmint's layouts, UUID v1-v8, ULID, KSUID,
    xid, ObjectId, SCRU128, TSID, Discord, ...) and ``candidates`` lists every reading, best
    first; otherwise ``layout`` names a built-in layout (and ``type_prefix`` the prefix of
    its TypeIDs).

    The dict has ``layout``, ``about``, ``id`` (the usual text), ``value`` (the integer, or
    ``None`` for other widths), ``time`` (a timezone-aware ``datetime`` in UTC, or ``None``),
    ``time_ms``, ``fields`` (name to value), and for 128-bit IDs ``forms`` (``uuid``,
    ``ulid``, ``typeid``, ``decimal``, ``hex``; else ``None``).
    """
    out: Dict[str, Any] = _idmint._decode(id, layout, type_prefix)
    out["time"] = _time(out["time_ms"])
    for candidate in out.get("candidates", ()):
        candidate["time"] = _time(candidate["time_ms"])
    return out


def explain(layout: str = "snowflake") -> Dict[str, Any]:
    """A layout's bits and capacity, as ``idmint explain LAYOUT --json`` prints them:
    ``layout``, ``bits``, ``order``, ``segments``, ``fields``, ``capacity`` (ticks, IDs per
    second per generator, generators, start and end) and ``warnings``."""
    out: Dict[str, Any] = _json.loads(_idmint._explain(layout))
    return out


def _after_fork_in_child() -> None:
    """The fork hook: a forked child's minters and clients drop what they prefetched in the
    parent, and claim and connect anew at their next call."""
    _idmint._after_fork_in_child()


if hasattr(_os, "register_at_fork"):
    _os.register_at_fork(after_in_child=_after_fork_in_child)
