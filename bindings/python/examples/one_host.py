"""One host: the processes of one machine share a data directory; each claims its own
generator ID, and a restart (even after a crash) starts above the last stored mark."""

import uuid

import idmint


def main(data_dir: str = "idmint-data") -> None:
    """Mints a few IDs of two namespaces and decodes one."""
    namespaces = {"orders": "snowflake", "users": {"layout": "uuid7", "type_prefix": "user"}}
    with idmint.Minter(data_dir=data_dir, namespaces=namespaces) as minter:
        order: int = minter.next()
        user: str = minter.next("users")
        event: uuid.UUID = minter.next("users", format="uuid")
        ids = minter.batch(1_000)
        when = idmint.decode(order)["time"]
        print(order, user, event, len(ids), when, minter.generator_id())


if __name__ == "__main__":
    main()
