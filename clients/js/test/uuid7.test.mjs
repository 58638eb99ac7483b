//! The JS client on a 128-bit `uuid7` namespace with a TypeID prefix, against a real `idmint serve`: every string form, BigInt, batches, and the refusals.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createClient } from "../dist/index.js";
import { startIdmint } from "./harness.mjs";

const TOML = '[[server.namespaces]]\nname = "users"\nlayout = "uuid7"\ntype_prefix = "user"\ngenerator_id = 1\n';
const FORMS = {
  namespace: /^user_[0-7][0-9a-hjkmnp-tv-z]{25}$/,
  typeid: /^user_[0-7][0-9a-hjkmnp-tv-z]{25}$/,
  uuid: /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
  ulid: /^[0-7][0-9A-HJKMNP-TV-Z]{25}$/,
  decimal: /^[1-9][0-9]{0,38}$/,
};

test("uuid7 with type_prefix: every form from next() and batch(), BigInt exact, refusals", async () => {
  const server = await startIdmint({ toml: TOML });
  try {
    for (const [format, shape] of Object.entries(FORMS)) {
      const client = createClient({ endpoints: [server.url], namespace: "users", format, prefetch: 50 });
      const ids = [];
      for (let i = 0; i < 120; i++) ids.push(await client.next());
      ids.push(...(await client.batch(500)));
      for (const id of ids) assert.match(id, shape, `${format}: ${id}`);
      assert.equal(new Set(ids).size, ids.length, `${format}: an ID twice`);
      client.close();
    }
    const big = createClient({ endpoints: [server.url], namespace: "users", ids: "bigint" });
    const a = await big.next();
    assert.equal(typeof a, "bigint");
    assert.equal(a >> 76n & 0xfn, 7n, "version 7 in the exact 128-bit value");
    big.close();
    assert.throws(() => createClient({ endpoints: [server.url], ids: "bigint", format: "uuid" }), /needs ids: "string"/);
    const number = createClient({ endpoints: [server.url], namespace: "users", ids: "number" });
    await assert.rejects(number.next(), (e) => e.kind === "NotJsSafe");
    number.close();
  } finally {
    await server.stop();
  }
});
