// nextWithShardKey and batchWithShardKey against a real `idmint serve`: the key lands in every
// HotGuid, next() keeps the namespace's own key, and keys the namespace does not take are
// refused (InvalidOptions before any request, Rejected 400 from the server). Run:
// `npm run build && npm test`.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { createClient, IdMintError } from "../dist/index.js";
import { startIdmint } from "./harness.mjs";

const toml = `
[server]
[[server.namespaces]]
name = "guids"
layout = "hot-guid"
shard_keys = "0..=1023"
fields = { shard_key = 208 }
[[server.namespaces]]
name = "orders"
layout = "snowflake"
`;

/**
 * The shard key of a HotGuid given as its decimal u128 (the "D" string's digits as one
 * number): HotGuid's ExtractShardKey reads the last 4 bytes little-endian.
 */
function shardKeyOf(id) {
  const low = Number(BigInt(id) & 0xffffffffn);
  return ((low & 0xff) << 24 | ((low >> 8) & 0xff) << 16 | ((low >> 16) & 0xff) << 8 | (low >>> 24)) >>> 0;
}

describe("shard keys per call", () => {
  let server;
  before(async () => {
    server = await startIdmint({ toml });
  });
  after(async () => {
    await server?.stop();
  });

  test("the key reaches every id; next() keeps the namespace's own", async () => {
    const client = createClient({ endpoints: [server.url], namespace: "guids", ids: "bigint" });
    let previous = -1n;
    for (const key of [0, 1023, 7, 7, 512]) {
      const id = await client.nextWithShardKey(key);
      assert.equal(typeof id, "bigint");
      assert.equal(shardKeyOf(id), key);
      assert.ok(id > previous, `${id} after ${previous}`);
      previous = id;
    }
    const batch = await client.batchWithShardKey(100, 99);
    assert.equal(batch.length, 100);
    assert.ok(batch.every((id) => shardKeyOf(id) === 99));
    assert.equal(shardKeyOf(await client.next()), 208);
    client.close();
  });

  test("keys the namespace does not take are refused", async () => {
    const client = createClient({ endpoints: [server.url], namespace: "guids" });
    for (const bad of [-1, 1.5, 4_294_967_296, Number.NaN, "7"]) {
      await assert.rejects(client.nextWithShardKey(bad), (e) => e instanceof IdMintError && e.kind === "InvalidOptions", String(bad));
    }
    const rejected = (message) => (e) =>
      e instanceof IdMintError && e.kind === "Rejected" && e.status === 400 && e.code === "bad_request" && e.message.includes(message);
    await assert.rejects(client.nextWithShardKey(1024), rejected("outside the shard keys of namespace `guids` (0..=1023)"));
    await assert.rejects(client.batchWithShardKey(0, 1), (e) => e instanceof IdMintError && e.kind === "InvalidOptions");
    const orders = createClient({ endpoints: [server.url], namespace: "orders" });
    await assert.rejects(orders.nextWithShardKey(1), rejected("hot-guid namespaces only"));
    client.close();
    orders.close();
  });
});
