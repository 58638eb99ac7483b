//! Interop with typeid-js (the TypeScript TypeID implementation): it parses 10,000 TypeIDs idmint mints, idmint decodes 10,000 it makes, and the checker catches a mismatch.
import { test } from "node:test";
import assert from "node:assert/strict";
import { TypeID, typeid } from "typeid-js";
import { createClient } from "../dist/index.js";
import { startIdmint } from "./harness.mjs";

const TOML = '[[server.namespaces]]\nname = "users"\nlayout = "uuid7"\ntype_prefix = "user"\ngenerator_id = 1\n';
const N = 10_000;

/** The UUID the server's decoded uuid7 fields spell (RFC 9562 section 5.7, idmint's rand_a/rand_b split). */
function uuidOfFields(f) {
  const v = (BigInt(f.unix_ms) << 80n) | (7n << 76n) | (BigInt(f.counter) << 64n) | (2n << 62n) | (BigInt(f.generator) << 46n) | BigInt(f.random);
  const h = v.toString(16).padStart(32, "0");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** Decodes `ids` through the HTTP decode route, 100 at a time; returns [status, body] each. */
async function decodeAll(url, ids) {
  const out = [];
  for (let i = 0; i < ids.length; i += 100) {
    out.push(...(await Promise.all(ids.slice(i, i + 100).map(async (id) => {
      const r = await fetch(`${url}/v1/namespaces/users/decode/${encodeURIComponent(id)}`);
      return [r.status, await r.json()];
    }))));
  }
  return out;
}

/** The problems with one (TypeID, expected UUID, expected ms) triple; empty when they agree. */
function check(text, uuid, ms) {
  let t;
  try { t = TypeID.fromString(text); } catch (e) { return [`${text}: typeid-js refuses it: ${e.message}`]; }
  const bad = [];
  if (t.getType() !== "user") bad.push(`${text}: prefix ${t.getType()}`);
  if (t.toUUID() !== uuid) bad.push(`${text}: typeid-js UUID ${t.toUUID()}, idmint ${uuid}`);
  const tms = parseInt(t.toUUID().replace(/-/g, "").slice(0, 12), 16);
  if (tms !== ms) bad.push(`${text}: UUIDv7 ms ${tms}, idmint ${ms}`);
  return bad;
}

test("typeid-js and idmint agree on 10,000 IDs each way; a mismatch is caught", async () => {
  const server = await startIdmint({ toml: TOML });
  try {
    // idmint -> typeid-js
    const client = createClient({ endpoints: [server.url], namespace: "users", prefetch: 1000 });
    const minted = [];
    for (let i = 0; i < N; i++) minted.push(await client.next());
    client.close();
    const decoded = await decodeAll(server.url, minted);
    const problems = [];
    minted.forEach((text, i) => {
      const [status, body] = decoded[i];
      if (status !== 200) return problems.push(`${text}: decode ${status}`);
      problems.push(...check(text, uuidOfFields(body.fields), Date.parse(body.time)));
    });
    assert.deepEqual(problems.slice(0, 5), [], `${problems.length} of ${N} minted IDs disagree`);
    // typeid-js -> idmint
    const made = Array.from({ length: N }, () => typeid("user"));
    const back = await decodeAll(server.url, made.map(String));
    const problems2 = [];
    made.forEach((t, i) => {
      const [status, body] = back[i];
      if (status !== 200) return problems2.push(`${t}: decode ${status} ${JSON.stringify(body)}`);
      if (uuidOfFields(body.fields) !== t.toUUID()) problems2.push(`${t}: idmint ${uuidOfFields(body.fields)}, typeid-js ${t.toUUID()}`);
      const ms = parseInt(t.toUUID().replace(/-/g, "").slice(0, 12), 16);
      if (Date.parse(body.time) !== ms || body.fields.unix_ms !== ms) problems2.push(`${t}: time ${body.time}, typeid-js ms ${ms}`);
    });
    assert.deepEqual(problems2.slice(0, 5), [], `${problems2.length} of ${N} typeid-js IDs disagree`);
    // another prefix is refused, naming both
    const [status, body] = (await decodeAll(server.url, [String(typeid("order"))]))[0];
    assert.equal(status, 400);
    assert.equal(body.error.code, "type_prefix_mismatch");
    assert.match(body.error.message, /`order`.*`user`/);
    // negative controls: one character changed, and a wrong prefix, are reported
    const [s0, b0] = decoded[0];
    assert.equal(s0, 200);
    const good = minted[0];
    const last = good.at(-1) === "0" ? "1" : "0";
    assert.notDeepEqual(check(good.slice(0, -1) + last, uuidOfFields(b0.fields), Date.parse(b0.time)), []);
    assert.notDeepEqual(check("order" + good.slice(4), uuidOfFields(b0.fields), Date.parse(b0.time)), []);
    assert.deepEqual(check(good, uuidOfFields(b0.fields), Date.parse(b0.time)), []);
  } finally {
    await server.stop();
  }
});
