"""The API of one minter in one process: forms, namespaces, batches, errors, decode, explain,
public IDs, and the configuration file and environment."""

from __future__ import annotations

import datetime
import json
import os
import secrets
import uuid
from pathlib import Path

import pytest

import idmint
from idmint import _idmint


def test_next_and_batch_increase_in_the_usual_forms(tmp_path: Path) -> None:
    namespaces = {
        "orders": "snowflake",
        "events": "uuid7",
        "users": {"layout": "uuid7", "type_prefix": "user"},
    }
    with idmint.Minter(data_dir=tmp_path, namespaces=namespaces) as minter:
        assert minter.namespaces == ["orders", "events", "users"]
        first, second = minter.next(), minter.next("orders")
        assert isinstance(first, int) and first < second
        event = minter.next("events")
        assert isinstance(event, uuid.UUID) and event.version == 7
        user = minter.next("users")
        assert isinstance(user, str) and user.startswith("user_") and len(user) == 31
        assert minter.next("events", format="int") > event.int
        assert isinstance(minter.next("events", format="ulid"), str)
        assert int(minter.next(format="hex"), 16) > second
        ids = minter.batch(10_000)
        assert len(ids) == 10_000 and all(a < b for a, b in zip(ids, ids[1:]))
        assert ids[0] > second
        assert minter.next() > ids[-1], "next() after a batch answers above it"
        uuids = minter.batch(100, "events")
        assert all(isinstance(u, uuid.UUID) for u in uuids)
        assert minter.generator_id("orders") == 0
        assert "orders: snowflake (generator 0)" in repr(minter)


def test_errors_carry_the_messages_of_the_crate(tmp_path: Path) -> None:
    minter = idmint.Minter(data_dir=tmp_path, layout="sonyflake")
    with pytest.raises(idmint.NamespaceError, match="no namespace `nope`; this minter has default"):
        minter.next("nope")
    with pytest.raises(idmint.RequestError, match="needs a 128-bit layout"):
        minter.next(format="ulid")
    with pytest.raises(idmint.ConfigError):
        minter.next(format="no-such-form")
    with pytest.raises(idmint.RequestError):
        minter.batch(0)
    minter.close()
    minter.close()
    with pytest.raises(idmint.ClosedError, match="the minter is closed"):
        minter.next()
    with pytest.raises(idmint.ConfigError, match="unknown layout|no layout|layout"):
        idmint.Minter(data_dir=tmp_path / "b", layout="no-such-layout")
    with pytest.raises(idmint.ConfigError, match="lease TTL"):
        idmint.Minter(data_dir=tmp_path / "c", postgres="postgresql://x@127.0.0.1/x", lease_ttl=0.5)
    assert issubclass(idmint.ConfigError, idmint.Error)
    assert issubclass(idmint.DecodeError, ValueError)


def test_a_data_directory_of_another_user_is_a_store_error(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give the directory to another user")
    os.chown(tmp_path, 4242, 4242)
    with pytest.raises(idmint.StoreError, match="owned by user 4242"):
        idmint.Minter(data_dir=tmp_path)


def test_etcd_that_does_not_answer_is_a_clear_error(tmp_path: Path) -> None:
    # Nothing listens on port 9 (discard).
    with pytest.raises(idmint.StoreError):
        idmint.Minter(data_dir=tmp_path, etcd=["http://127.0.0.1:9"])
    with pytest.raises(idmint.ConfigError, match="etcd_prefix= goes with etcd="):
        idmint.Minter(data_dir=tmp_path, etcd_prefix="app/")


def test_decode_auto_and_by_layout(tmp_path: Path) -> None:
    with idmint.Minter(data_dir=tmp_path, namespaces={"s": "snowflake", "u": "uuid7"}) as minter:
        before = datetime.datetime.now(datetime.timezone.utc)
        sid, uid = minter.next(), minter.next("u")
    decoded = idmint.decode(sid)
    assert decoded["layout"] == "snowflake" and decoded["value"] == sid
    assert decoded["fields"]["worker"] == 0
    assert decoded["time"].tzinfo is not None
    assert abs((decoded["time"] - before).total_seconds()) < 60
    assert decoded["candidates"][0]["layout"] == "snowflake"
    as_uuid = idmint.decode(uid)
    assert as_uuid["layout"] in ("uuid7", "uuid-v7")
    assert as_uuid["forms"]["uuid"] == str(uid)
    assert as_uuid["forms"]["ulid"] and as_uuid["forms"]["typeid"]
    named = idmint.decode(str(sid), layout="snowflake")
    assert named["fields"] == decoded["fields"] and named["forms"] is None
    wide = idmint.decode(uid, layout="uuid7")
    assert wide["forms"]["hex"] == uid.hex
    with pytest.raises(idmint.DecodeError):
        idmint.decode("not an id at all!", layout="snowflake")


def test_layouts_and_explain() -> None:
    layouts = idmint.layouts()
    assert "snowflake" in layouts and "uuid7" in layouts
    explained = idmint.explain("snowflake")
    assert explained["bits"] == 64
    assert explained["capacity"]["ids_per_second_per_generator"] == 4_096_000
    assert [f["name"] for f in explained["fields"]][-1] == "sequence"
    with pytest.raises(idmint.ConfigError):
        idmint.explain("no-such-layout")


def test_public_ids_round_trip(tmp_path: Path) -> None:
    key_file = tmp_path / "keys.json"
    key_file.write_text(json.dumps({
        "method": "ff1", "version_bits": 0, "active": 0,
        "keys": [{"version": 0, "secret": secrets.token_hex(32)}],
    }))
    with idmint.Minter(data_dir=tmp_path / "d") as minter:
        ids = minter.batch(100)
    public = [idmint.obfuscate(i, key_file=key_file) for i in ids]
    assert all(isinstance(p, int) for p in public) and public != ids
    assert [idmint.reveal(p, key_file=key_file) for p in public] == ids
    text = idmint.obfuscate(str(ids[0]), key_file=key_file)
    assert text == str(public[0])
    with pytest.raises(idmint.ConfigError, match="not a key file|cannot read key file"):
        idmint.obfuscate(ids[0], key_file=tmp_path / "missing.json")


def test_from_config_and_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "idmint.toml"
    config.write_text(
        f'listen = "127.0.0.1:0"\ndata_dir = "{tmp_path / "data"}"\n[server]\nwindow_ms = 2000\n'
        '[[server.namespaces]]\nname = "orders"\n'
        '[[server.namespaces]]\nname = "users"\nlayout = "uuid7"\ntype_prefix = "user"\n'
    )
    with idmint.Minter.from_config(config) as minter:
        assert minter.namespaces == ["orders", "users"]
        assert isinstance(minter.next(), int)
        assert minter.next("users").startswith("user_")
    monkeypatch.setenv("IDMINT_CONFIG", str(config))
    monkeypatch.setenv("IDMINT_LAYOUT", "sonyflake")
    # Another layout on the same marks is refused (StoreError): another data directory.
    monkeypatch.setenv("IDMINT_DATA_DIR", str(tmp_path / "sonyflake-data"))
    with idmint.Minter.from_env() as minter:
        assert minter.layout() == "sonyflake"
        assert idmint.decode(minter.next(), layout="sonyflake")["layout"] == "sonyflake"
    config.write_text("no_such_key = 1\n")
    with pytest.raises(idmint.ConfigError, match="cannot use the configuration file"):
        idmint.Minter.from_config(config)


def test_the_negative_control_needs_a_negative_controls_build(tmp_path: Path) -> None:
    if _idmint._negative_controls():
        minter = idmint.Minter(data_dir=tmp_path, _unsafe_no_fork_hook=True)  # type: ignore[call-arg]
        assert minter._fork_hook is False
        minter.close()
    else:
        with pytest.raises(idmint.ConfigError, match="negative control"):
            idmint.Minter(data_dir=tmp_path, _unsafe_no_fork_hook=True)  # type: ignore[call-arg]
