// The JS client against real `idmint serve` processes (and, for failures a real server does
// not produce on demand, small fake servers). Run: `npm run build && npm test`.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { createClient, IdMintError, orderOf } from "../dist/index.js";
import { fakeServer, startIdmint } from "./harness.mjs";

const TOKEN = "s3cret-js";

/** Namespaces of one server; `generator` fixes the snowflake generator ID. */
const toml = (generator) => `
[server]
[[server.namespaces]]
name = "orders"
layout = "snowflake"
generator_id = ${generator}
[[server.namespaces]]
name = "web"
layout = "js53"
token = "${TOKEN}"
[[server.namespaces]]
name = "rows"
layout = "sequence"
`;

const SNOWFLAKE_INFO = {
  name: "orders",
  layout: "snowflake",
  fingerprint: "snowflake/63b/epoch=1288834974657/tick=1/timestamp:41:time,datacenter:5:node,worker:5:node,sequence:12:sequence",
  id_bits: 64,
  js_safe: false,
  default_format: "decimal",
  generator_id: 7,
  ready: true,
  generators: 1024,
  auth: false,
  source: "generator",
  order: "increasing",
};

/** The snowflake generator ID (datacenter and worker) of an ID. */
const generatorOf = (id) => Number((BigInt(id) >> 12n) & 1023n);

/** Asserts no ID twice; returns how many there were. */
function assertUnique(ids, what) {
  const seen = new Set();
  for (const id of ids) {
    assert.ok(!seen.has(id), `${what}: ${id} handed out twice`);
    seen.add(id);
  }
  return seen.size;
}

test("the order of a namespace is what the server says: only `increasing` is checked for order", () => {
  const check = (order, want) => assert.equal(orderOf({ ...SNOWFLAKE_INFO, order }), want, String(order));
  check("increasing", "increasing");
  check("k-sorted", "distinct");
  check("periodic", "distinct");
  check("sharded", "distinct");
  check("unordered", "distinct");
  check("", "distinct");
  check(undefined, "distinct");
  check("something else", "distinct");
});

describe("against one real server", () => {
  let server;
  before(async () => {
    server = await startIdmint({ toml: toml(1) });
  });
  after(async () => {
    await server?.stop();
  });

  test("next() hands out increasing decimal strings from the buffer, batch() bypasses it", async () => {
    const client = createClient({ endpoints: [server.url], namespace: "orders", prefetch: 500, lowWater: 100 });
    const ids = [];
    for (let i = 0; i < 5000; i++) ids.push(await client.next());
    assert.ok(ids.every((id) => typeof id === "string" && /^[1-9][0-9]*$/.test(id)));
    for (let i = 1; i < ids.length; i++) assert.ok(BigInt(ids[i - 1]) < BigInt(ids[i]), `${ids[i - 1]} then ${ids[i]}`);
    const batch = await client.batch(1000);
    assert.equal(batch.length, 1000);
    assert.equal(assertUnique([...ids, ...batch], "next and batch"), 6000);
    assert.ok(ids.every((id) => generatorOf(id) === 1));
    client.close();
    await assert.rejects(client.next(), (e) => e instanceof IdMintError && e.kind === "Closed");
  });

  test("ids: bigint gives BigInt; ids: number only for js53 namespaces", async () => {
    const big = createClient({ endpoints: [server.url], namespace: "orders", ids: "bigint" });
    const a = await big.next();
    const b = await big.next();
    assert.equal(typeof a, "bigint");
    assert.ok(a < b);
    const refused = createClient({ endpoints: [server.url], namespace: "orders", ids: "number" });
    await assert.rejects(refused.next(), (e) => e instanceof IdMintError && e.kind === "NotJsSafe");
    const js = createClient({ endpoints: [server.url], namespace: "web", token: TOKEN, ids: "number" });
    const n = await js.next();
    assert.equal(typeof n, "number");
    assert.ok(Number.isSafeInteger(n));
    const many = await js.batch(2000);
    assert.ok(many.every(Number.isSafeInteger));
    assert.equal(assertUnique([n, ...many], "js53 numbers"), 2001);
  });

  test("a token-protected namespace: 401 without the token, 403 with another, not retried", async () => {
    const none = createClient({ endpoints: [server.url, server.url], namespace: "web", attempts: 5 });
    const started = Date.now();
    await assert.rejects(none.next(), (e) => e.kind === "Rejected" && e.status === 401 && e.code === "unauthorized");
    const wrong = createClient({ endpoints: [server.url], namespace: "web", token: "nope" });
    await assert.rejects(wrong.batch(10), (e) => e.kind === "Rejected" && e.status === 403);
    assert.ok(Date.now() - started < 1000, "4xx answers must not be retried with backoff");
    const right = createClient({ endpoints: [server.url], namespace: "web", token: TOKEN });
    assert.equal((await right.batch(10)).length, 10);
  });

  test("a sequence namespace hands out consecutive integers, and an unknown one is refused", async () => {
    const rows = createClient({ endpoints: [server.url], namespace: "rows", prefetch: 10, lowWater: 0 });
    const got = [];
    for (let i = 0; i < 25; i++) got.push(BigInt(await rows.next()));
    for (let i = 1; i < got.length; i++) assert.ok(got[i] > got[i - 1]);
    const unknown = createClient({ endpoints: [server.url], namespace: "nope" });
    await assert.rejects(unknown.next(), (e) => e.kind === "Rejected" && e.code === "unknown_namespace");
  });

  test("bad options are refused before any request", () => {
    const check = (options, what) =>
      assert.throws(() => createClient(options), (e) => e instanceof IdMintError && e.kind === "InvalidOptions", what);
    check({ endpoints: [] }, "no endpoint");
    check({ endpoints: ["localhost:8080"] }, "no scheme");
    check({ endpoints: ["ftp://x"] }, "not http");
    check({ endpoints: [server.url], namespace: "Orders" }, "bad namespace");
    check({ endpoints: [server.url], prefetch: 0 }, "prefetch 0");
    check({ endpoints: [server.url], prefetch: 100_001 }, "prefetch too big");
    check({ endpoints: [server.url], prefetch: 10, lowWater: 10 }, "low water not below prefetch");
    check({ endpoints: [server.url], ids: "float" }, "bad ids mode");
    check({ endpoints: [server.url], token: "" }, "empty token");
    check({ endpoints: [server.url], timeoutMs: 0 }, "timeout 0");
  });
});

describe("failover across three real servers", () => {
  const servers = [];
  before(async () => {
    for (const generator of [1, 2, 3]) servers.push(await startIdmint({ toml: toml(generator) }));
  });
  after(async () => {
    for (const server of servers) await server.stop();
  });

  test("one of three servers stopped mid-run: next() goes on, 0 duplicates", async () => {
    const client = createClient({
      endpoints: servers.map((s) => s.url),
      namespace: "orders",
      prefetch: 200,
      lowWater: 50,
      timeoutMs: 1000,
    });
    const ids = [];
    for (let i = 0; i < 20_000; i++) ids.push(await client.next());
    const before = new Set(ids.map(generatorOf));
    assert.deepEqual([...before].sort(), [1, 2, 3], "round-robin reaches every server");
    await servers[1].kill();
    const afterStop = [];
    for (let i = 0; i < 20_000; i++) afterStop.push(await client.next());
    // The batches buffered before the stop may still be from server 2; nothing after them.
    const tail = afterStop.slice(400);
    assert.ok(tail.every((id) => generatorOf(id) !== 2), "no ID from the stopped server after its buffered batches");
    assert.deepEqual([...new Set(tail.map(generatorOf))].sort(), [1, 3]);
    const all = [...ids, ...afterStop];
    const unique = assertUnique(all, "failover");
    assert.equal(unique, 40_000);
    console.log(`# failover: ${all.length} ids, ${all.length - unique} duplicates, server 2 (pid ${servers[1].pid}) killed after 20,000`);
    client.close();
  });
});

describe("retries and checks (fake servers)", () => {
  let real;
  before(async () => {
    real = await startIdmint({ toml: toml(5) });
  });
  after(async () => {
    await real?.stop();
  });

  test("a 503 with Retry-After moves on to the next endpoint; a 400 is never retried", async () => {
    const busy = await fakeServer((req, res) => {
      res.writeHead(503, { "content-type": "application/json", "retry-after": "1" });
      res.end(JSON.stringify({ error: { code: "not_ready", message: "not ready" } }));
    }, [SNOWFLAKE_INFO]);
    const client = createClient({ endpoints: [busy.url, real.url], namespace: "orders", prefetch: 10, lowWater: 0 });
    const ids = [];
    for (let i = 0; i < 50; i++) ids.push(await client.next());
    assert.equal(assertUnique(ids, "503 failover"), 50);
    assert.equal(busy.hits.get("/v1/namespaces/orders/batch"), 1, "the busy endpoint stays ejected");
    await busy.close();

    const bad = await fakeServer((req, res) => {
      res.writeHead(400, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { code: "bad_request", message: "no" } }));
    }, [SNOWFLAKE_INFO]);
    const strict = createClient({ endpoints: [bad.url, real.url], namespace: "orders" });
    await assert.rejects(strict.batch(5), (e) => e.kind === "Rejected" && e.status === 400 && e.code === "bad_request");
    assert.equal(bad.hits.get("/v1/namespaces/orders/batch"), 1);
    await bad.close();
  });

  test("only 502-504 and network errors are retried: every endpoint 503 gives Unavailable", async () => {
    const busy = await fakeServer((req, res) => {
      res.writeHead(503, { "content-type": "application/json" });
      res.end("{}");
    }, [SNOWFLAKE_INFO]);
    const client = createClient({ endpoints: [busy.url], namespace: "orders", attempts: 3 });
    await assert.rejects(client.batch(3), (e) => e.kind === "Unavailable" && e.status === 503);
    assert.equal(busy.hits.get("/v1/namespaces/orders/batch"), 3);
    await busy.close();
    const port = (await import("./harness.mjs")).freePort;
    const nobody = `http://127.0.0.1:${await port()}`;
    const down = createClient({ endpoints: [nobody, real.url], namespace: "orders" });
    assert.equal((await down.batch(5)).length, 5, "a refused connection fails over");
  });

  test("a server that does not answer in time is left for the next one", async () => {
    const silent = await fakeServer(() => {}, [SNOWFLAKE_INFO]);
    const client = createClient({ endpoints: [silent.url, real.url], namespace: "orders", timeoutMs: 200 });
    const started = Date.now();
    assert.equal((await client.batch(5)).length, 5);
    assert.ok(Date.now() - started < 2000);
    const alone = createClient({ endpoints: [silent.url], namespace: "orders", timeoutMs: 100, attempts: 2 });
    await assert.rejects(alone.next(), (e) => e.kind === "Unavailable" && e.cause?.kind === "Timeout");
    await silent.close();
  });

  test("a batch out of order, or one that goes back, is dropped: NotMonotonic, nothing handed out", async () => {
    let answer = ["5", "4", "6"];
    const liar = await fakeServer((req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ namespace: "orders", ids: answer }));
    }, [SNOWFLAKE_INFO]);
    const client = createClient({ endpoints: [liar.url], namespace: "orders", prefetch: 3, lowWater: 0 });
    await assert.rejects(client.next(), (e) => e.kind === "NotMonotonic");
    // Negative control: the same server with an increasing batch is accepted ...
    answer = ["10", "11", "12"];
    assert.deepEqual([await client.next(), await client.next(), await client.next()], ["10", "11", "12"]);
    // ... and its next prefetched batch may not go back on the same generator ID.
    answer = ["11", "13", "14"];
    await assert.rejects(client.next(), (e) => e.kind === "NotMonotonic");
    answer = ["12", "12", "13"];
    await assert.rejects(createClient({ endpoints: [liar.url], namespace: "orders" }).batch(3), (e) => e.kind === "NotMonotonic");
    await liar.close();
  });

  test("endpoints that disagree on the layout are refused", async () => {
    const other = await fakeServer((req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ namespace: "orders", ids: ["1", "2"] }));
    }, [{ ...SNOWFLAKE_INFO, fingerprint: "snowflake/63b/epoch=0/tick=1/timestamp:41:time,worker:10:node,sequence:12:sequence" }]);
    const client = createClient({ endpoints: [real.url, other.url], namespace: "orders" });
    assert.equal((await client.batch(2)).length, 2);
    await assert.rejects(client.batch(2), (e) => e.kind === "LayoutMismatch");
    await other.close();
  });
});
