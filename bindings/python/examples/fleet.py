"""A server fleet: IDs from `idmint serve` instances, with failover and prefetching."""

import idmint


def main(endpoints: "list[str] | None" = None) -> None:
    """Takes IDs from the servers (default: one on localhost)."""
    urls = endpoints or ["http://127.0.0.1:8080"]
    with idmint.Client(urls, namespace="default", prefetch=1_000) as client:
        first: int = client.next()
        more = client.batch(500)
        print(first, len(more))
    try:
        idmint.Client(["http://127.0.0.1:9"]).next()
    except idmint.UnavailableError as e:
        print("no server answered:", e)


if __name__ == "__main__":
    main()
