"""A fleet on Postgres: every host claims its generator ID in the database you already run;
the data directory remembers the fleet's store."""

import os

import idmint


def main() -> None:
    """Mints IDs with claims and marks in Postgres (IDMINT_POSTGRES, a connection string)."""
    url = os.environ.get("IDMINT_POSTGRES", "postgresql://idmint@127.0.0.1/idmint")
    with idmint.Minter(data_dir="idmint-data", postgres=url, lease_ttl=10) as minter:
        ids: list[int] = minter.batch(100)
        print(ids[0], minter.next(), minter.generator_id())


if __name__ == "__main__":
    main()
