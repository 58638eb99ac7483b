"""The exceptions of idmint: every one is an :class:`Error`, and carries the message the
``idmint`` CLI prints for the same failure."""

from __future__ import annotations

__all__ = [
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


class Error(Exception):
    """The base class of every idmint exception."""


class ConfigError(Error, ValueError):
    """Invalid settings: a keyword argument, a configuration file, a store URL, a layout."""


class NamespaceError(Error, KeyError):
    """No namespace of that name; the message lists the ones there are."""

    def __str__(self) -> str:
        # KeyError would quote the message.
        return str(self.args[0]) if self.args else ""


class StoreError(Error):
    """The store of claims and marks (the data directory, Postgres, etcd) cannot be reached,
    written or used."""


class ClockError(Error):
    """The clock went back, or is outside what the layout can represent."""


class ExhaustedError(Error):
    """No ID is left for now: the layout's time, the window or the pool of generator IDs."""


class UnavailableError(Error):
    """Not ready yet, busy past the wait limit, or no server answered."""


class ForkedError(Error):
    """A minter built with ``on_fork="refuse"`` was used in a forked child."""


class ClosedError(Error):
    """The minter or client was closed."""


class DecodeError(Error, ValueError):
    """An ID or text does not read as the layout or format asked for."""


class RequestError(Error, ValueError):
    """An argument is refused: a batch size out of range, a format this layout cannot take."""


class ClientError(Error):
    """A server answered something the client refuses (a wrong layout, IDs out of order)."""
