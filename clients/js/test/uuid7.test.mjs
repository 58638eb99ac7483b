//! The JS client on a 128-bit `uuid7` namespace with a TypeID prefix, against a real `idmint serve`: every string form, BigInt, batches, and the refusals.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createClient } from "../dist/index.js";
import { fakeServer, startIdmint } from "./harness.mjs";

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

    // The server says the namespace is `increasing`, so batches are checked for order: a
    // server that answers the same real IDs swapped is refused, in order they pass.
    const info = (await (await fetch(`${server.url}/v1/namespaces`)).json()).namespaces.find((n) => n.name === "users");
    assert.equal(info.order, "increasing");
    const real = createClient({ endpoints: [server.url], namespace: "users", format: "uuid" });
    const pair = await real.batch(2);
    real.close();
    let answer = pair;
    const liar = await fakeServer((req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ namespace: "users", ids: answer }));
    }, [info]);
    try {
      const client = createClient({ endpoints: [liar.url], namespace: "users", format: "uuid" });
      assert.deepEqual(await client.batch(2), pair);
      answer = [pair[1], pair[0]];
      await assert.rejects(client.batch(2), (e) => e.kind === "NotMonotonic");
      client.close();
    } finally {
      await liar.close();
    }
  } finally {
    await server.stop();
  }
});
