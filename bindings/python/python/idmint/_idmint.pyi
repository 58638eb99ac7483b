"""Type stubs of the extension module ``idmint._idmint`` (re-exported by ``idmint``)."""

import os
import uuid
from types import TracebackType
from typing import Any, Dict, List, Mapping, Optional, Sequence, Type, Union

_Id = Union[int, str, uuid.UUID]
_Namespaces = Union[Mapping[str, Any], Sequence[str]]

class Minter:
    """Unique IDs in this process: an embedded, fleet-safe minter. Several processes may
    share one data directory (each claims its own generator ID), or a fleet may claim through
    Postgres; a restart, even after a crash, starts above the last stored high-water mark; a
    forked child claims a generator ID of its own at its first call."""

    def __init__(
        self,
        *,
        data_dir: Optional[Union[str, "os.PathLike[str]"]] = None,
        postgres: Optional[str] = None,
        etcd: Optional[Sequence[str]] = None,
        etcd_prefix: Optional[str] = None,
        namespaces: Optional[_Namespaces] = None,
        layout: Optional[str] = None,
        window_ms: Optional[int] = None,
        lease_ttl: Optional[float] = None,
        max_batch: Optional[int] = None,
        on_fork: str = "claim",
    ) -> None:
        """Builds a minter and claims a generator ID for every namespace."""
    @classmethod
    def from_config(cls, path: Union[str, "os.PathLike[str]"]) -> "Minter":
        """A minter from the configuration file of ``idmint serve --config``."""
    @classmethod
    def from_env(cls) -> "Minter":
        """A minter from the ``IDMINT_*`` environment variables."""
    def next(self, namespace: Optional[str] = None, format: Optional[str] = None) -> Any:
        """The next ID: ``int``, ``uuid.UUID`` or ``str`` (the namespace's form or ``format``)."""
    def batch(
        self, n: int, namespace: Optional[str] = None, format: Optional[str] = None
    ) -> List[Any]:
        """``n`` increasing IDs of ``namespace`` as a list."""
    def generator_id(self, namespace: Optional[str] = None) -> Optional[int]:
        """The generator ID this process holds for ``namespace``."""
    @property
    def namespaces(self) -> List[str]:
        """The names of the namespaces, the first being the default."""
    def layout(self, namespace: Optional[str] = None) -> str:
        """The layout name of ``namespace``."""
    def close(self) -> None:
        """Stores every mark and releases every claim."""
    def __enter__(self) -> "Minter":
        """The minter itself."""
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool:
        """Closes the minter."""
    @property
    def _fork_hook(self) -> bool:
        """Whether the fork hook empties this minter's buffers (tests only)."""

class Client:
    """A client of a fleet of ``idmint serve``: failover, safe retries, prefetching."""

    def __init__(
        self,
        endpoints: Sequence[str],
        *,
        namespace: Optional[str] = None,
        token: Optional[str] = None,
        prefetch: Optional[int] = None,
    ) -> None:
        """A client of the servers at ``endpoints``."""
    def next(self, format: Optional[str] = None) -> Any:
        """The next ID: ``int`` (64-bit), ``uuid.UUID`` (128-bit) or ``str`` in ``format``."""
    def batch(self, n: int, format: Optional[str] = None) -> List[Any]:
        """``n`` increasing IDs as a list."""
    @property
    def namespace(self) -> str:
        """The namespace the client asks for."""
    @property
    def endpoints(self) -> List[str]:
        """The servers' URLs."""
    def close(self) -> None:
        """Stops prefetching; later calls raise ``ClosedError``."""
    def __enter__(self) -> "Client":
        """The client itself."""
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool:
        """Closes the client."""

def layouts() -> Dict[str, str]:
    """The built-in layouts: name to description."""

def obfuscate(id: _Id, *, key_file: Union[str, "os.PathLike[str]"], layout: str = "snowflake") -> _Id:
    """The public ID of ``id``, in the kind it was given in."""

def reveal(id: _Id, *, key_file: Union[str, "os.PathLike[str]"], layout: str = "snowflake") -> _Id:
    """The ID behind a public ID, in the kind it was given in."""

def _decode(id: _Id, layout: str = "auto", type_prefix: Optional[str] = None) -> Dict[str, Any]: ...
def _explain(layout: str) -> str: ...
def _after_fork_in_child() -> None: ...
def _negative_controls() -> bool: ...
