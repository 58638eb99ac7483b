// The status page and CORS in a real browser: Debian's chromium driven by playwright-core
// (headless, no sandbox, background networking off, a fresh profile), against a real
// `idmint serve`. Saves test-artifacts/status.png and status-phone.png.
//
// Under CI=true a missing chromium fails the test; elsewhere it is reported as skipped.

import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

import { explain, freePort, startIdmint } from "./harness.mjs";

const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const ARTIFACTS = join(dirname(fileURLToPath(import.meta.url)), "..", "test-artifacts");
const TOKEN = "s3cret-browser";
const haveChromium = existsSync(CHROMIUM);
if (!haveChromium && process.env.CI === "true") {
  throw new Error(`CI=true and no chromium at ${CHROMIUM}: install Debian's chromium (scripts/install-deps)`);
}

let idmint, grpcUrl, allowed, refused, context, profile;
const requests = [];

/** A second origin: a blank page on its own port. */
async function origin() {
  const server = createServer((req, res) => {
    res.writeHead(200, { "content-type": "text/html" });
    res.end("<!doctype html><title>another origin</title><p>another origin</p>");
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${server.address().port}`, close: () => new Promise((r) => { server.closeAllConnections(); server.close(r); }) };
}

before(async () => {
  if (!haveChromium) return;
  allowed = await origin();
  refused = await origin();
  const grpcPort = await freePort();
  grpcUrl = `http://127.0.0.1:${grpcPort}`;
  idmint = await startIdmint({
    toml: `
[server]
[[server.namespaces]]
name = "orders"
layout = "snowflake"
[[server.namespaces]]
name = "web"
layout = "js53"
token = "${TOKEN}"
[[server.namespaces]]
name = "rows"
layout = "sequence"
`,
    args: ["--cors-allow-origin", allowed.url, "--grpc-listen", `127.0.0.1:${grpcPort}`],
  });
  const { chromium } = await import("playwright-core");
  profile = mkdtempSync(join(tmpdir(), "idmint-chromium-"));
  context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1200, height: 900 },
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
    ],
  });
  context.on("request", (request) => requests.push(request.url()));
  mkdirSync(ARTIFACTS, { recursive: true });
});

after(async () => {
  await context?.close();
  await idmint?.stop();
  await allowed?.close();
  await refused?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
});

const options = { skip: haveChromium ? false : `no chromium at ${CHROMIUM} (CI=true makes this a failure)` };

test("the status page shows every namespace, loads nothing from elsewhere, and draws layouts as explain does", options, async () => {
  const page = await context.newPage();
  requests.length = 0;
  const response = await page.goto(`${idmint.url}/`);
  assert.equal(response.status(), 200);
  for (const name of ["orders", "web", "rows"]) {
    await page.locator(`[data-namespace="${name}"]`).waitFor();
  }
  const orders = await page.locator('[data-namespace="orders"]').innerText();
  for (const text of ["ready", "snowflake", "generator", "held", "ahead of the wall clock"]) {
    assert.ok(orders.includes(text), `orders card lacks ${text}: ${orders}`);
  }
  assert.match(await page.locator('[data-namespace="rows"]').innerText(), /sequence[\s\S]*segment/);
  assert.match(await page.locator('[data-namespace="web"]').innerText(), /token\s+required/);
  // Rates appear after the second poll.
  await page.waitForFunction(() => !document.querySelector('[data-namespace="orders"]').innerText.includes("…"), null, { timeout: 5000 });
  for (const [name, layout] of [["orders", "snowflake"], ["web", "js53"], ["rows", "sequence"]]) {
    const drawn = await page.locator(`[data-layout="${name}"] pre.diagram`).textContent();
    const expected = explain(layout).split("\ncapacity\n")[0];
    assert.equal(drawn.trimEnd(), expected.trimEnd(), `the ${layout} diagram differs from idmint explain`);
  }
  const elsewhere = requests.filter((url) => !url.startsWith(idmint.url));
  assert.deepEqual(elsewhere, [], "the page must load nothing from another origin");
  // Every control has a label, and the page fits a phone's width.
  const unlabelled = await page.evaluate(() =>
    [...document.querySelectorAll("input, select, button")]
      .filter((el) => !(el.labels?.length || el.textContent.trim() || el.getAttribute("aria-label")))
      .map((el) => el.outerHTML),
  );
  assert.deepEqual(unlabelled, []);
  await page.setViewportSize({ width: 375, height: 800 });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 0, `the page scrolls sideways at 375 px by ${overflow} px`);
  await page.screenshot({ path: join(ARTIFACTS, "status-phone.png"), fullPage: true });
  await page.close();
});

test("the decode box shows an ID's fields, time and bit diagram; a token is typed, kept in memory, sent as a header", options, async () => {
  const page = await context.newPage();
  await page.goto(`${idmint.url}/`);
  await page.locator('#decode-ns option[value="orders"]').waitFor({ state: "attached" });
  const { id } = await (await fetch(`${idmint.url}/v1/namespaces/orders/next`)).json();
  const expected = await (await fetch(`${idmint.url}/v1/namespaces/orders/decode/${id}`)).json();
  // Keyboard only: focus the ID field, type, Enter.
  await page.selectOption("#decode-ns", "orders");
  await page.focus("#decode-id");
  await page.keyboard.type(id);
  await page.keyboard.press("Enter");
  await page.locator("#decoded-fields").waitFor();
  const fields = await page.$$eval("#decoded-fields tr[data-field]", (rows) =>
    Object.fromEntries(rows.map((row) => [row.dataset.field, row.querySelector("td").textContent])),
  );
  assert.deepEqual(fields, Object.fromEntries(Object.entries(expected.fields).map(([k, v]) => [k, String(v)])));
  assert.deepEqual(Object.keys(fields), ["timestamp", "datacenter", "worker", "sequence"]);
  const bits = await page.$$eval("#decoded-fields tr[data-field]", (rows) =>
    Object.fromEntries(rows.map((row) => [row.dataset.field, row.querySelectorAll("td")[1].textContent])),
  );
  for (const [field, width] of Object.entries({ timestamp: 41, datacenter: 5, worker: 5, sequence: 12 })) {
    assert.equal(bits[field].length, width, `${field} bits ${bits[field]}`);
    assert.equal(BigInt(`0b${bits[field]}`), BigInt(expected.fields[field]), field);
  }
  assert.equal(BigInt(`0b0${Object.values(bits).join("")}`), BigInt(id), "the bits of the fields make up the ID");
  assert.equal(await page.locator("#decoded-time").textContent(), expected.time);
  const diagram = await page.locator("#decoded-diagram").textContent();
  assert.equal(diagram.trimEnd(), explain("snowflake").split("\ncapacity\n")[0].trimEnd());
  // Some load, so that the screenshot shows live rates: batches of 1,000 for two polls.
  let loading = true;
  const load = (async () => {
    while (loading) await (await fetch(`${idmint.url}/v1/namespaces/orders/batch?count=1000`)).arrayBuffer();
  })();
  await page.waitForFunction(
    () => /IDs\/s\s+[1-9]/.test(document.querySelector('[data-namespace="orders"]').innerText),
    null,
    { timeout: 5000 },
  );
  loading = false;
  await load;
  await page.screenshot({ path: join(ARTIFACTS, "status.png"), fullPage: true });

  // The token-protected namespace: refused without the token, decoded with it.
  const web = await (await fetch(`${idmint.url}/v1/namespaces/web/next`, { headers: { authorization: `Bearer ${TOKEN}` } })).json();
  await page.selectOption("#decode-ns", "web");
  await page.fill("#decode-id", String(web.id));
  await page.click("#decode-submit");
  await page.locator("#decode-result .error").waitFor();
  assert.match(await page.locator("#decode-result").innerText(), /Token field/);
  const sent = [];
  page.on("request", (request) => sent.push({ url: request.url(), auth: request.headers().authorization }));
  await page.fill("#token", TOKEN);
  await page.click("#decode-submit");
  await page.locator("#decoded-fields").waitFor();
  assert.match(await page.locator("#decode-result h3").innerText(), /in web \(js53\)/);
  const decodeCall = sent.find((r) => r.url.includes("/decode/"));
  assert.equal(decodeCall?.auth, `Bearer ${TOKEN}`);
  assert.ok(!decodeCall.url.includes(TOKEN));
  await page.waitForTimeout(1200); // a status poll goes by
  const statusCalls = sent.filter((r) => r.url.endsWith("/v1/status"));
  assert.ok(statusCalls.length > 0 && statusCalls.every((r) => r.auth === undefined), "status polls carry no token");
  const stored = await page.evaluate(() => JSON.stringify([{ ...localStorage }, { ...sessionStorage }, document.cookie, location.href]));
  assert.ok(!stored.includes(TOKEN), `the token was stored: ${stored}`);
  assert.ok(!(await page.content()).includes(TOKEN), "the token is in the page's markup");
  await page.click("#token-clear");
  assert.equal(await page.inputValue("#token"), "");
  await page.close();
});

test("from a second origin: IDs with CORS allowed, refused from a third; gRPC-web likewise", options, async () => {
  const fromOrigin = async (originUrl) => {
    const page = await context.newPage();
    await page.goto(originUrl);
    const result = await page.evaluate(
      async ({ api, grpc, token }) => {
        const attempt = async (f) => {
          try {
            return { ok: true, value: await f() };
          } catch (e) {
            return { ok: false, error: String(e) };
          }
        };
        const simple = await attempt(async () => (await (await fetch(`${api}/v1/namespaces/orders/next`)).json()).id);
        const withToken = await attempt(
          async () => (await (await fetch(`${api}/v1/namespaces/web/batch?count=3`, { headers: { authorization: `Bearer ${token}` } })).json()).ids,
        );
        const grpcWeb = await attempt(async () => {
          const response = await fetch(`${grpc}/idmint.v1.IdMint/ListNamespaces`, {
            method: "POST",
            headers: { "content-type": "application/grpc-web+proto", "x-grpc-web": "1" },
            body: new Uint8Array([0, 0, 0, 0, 0]),
          });
          const bytes = new Uint8Array(await response.arrayBuffer());
          return new TextDecoder().decode(bytes);
        });
        return { simple, withToken, grpcWeb };
      },
      { api: idmint.url, grpc: grpcUrl, token: TOKEN },
    );
    await page.close();
    return result;
  };
  const yes = await fromOrigin(allowed.url);
  assert.ok(yes.simple.ok && /^[0-9]+$/.test(yes.simple.value), JSON.stringify(yes.simple));
  assert.ok(yes.withToken.ok && yes.withToken.value.length === 3, JSON.stringify(yes.withToken));
  assert.ok(yes.grpcWeb.ok && yes.grpcWeb.value.includes("orders") && yes.grpcWeb.value.includes("grpc-status:0"), JSON.stringify(yes.grpcWeb));
  const no = await fromOrigin(refused.url);
  for (const [what, outcome] of Object.entries(no)) {
    assert.ok(!outcome.ok && /Failed to fetch|TypeError/.test(outcome.error), `${what} from a refused origin: ${JSON.stringify(outcome)}`);
  }
  console.log(`# CORS: allowed origin ${allowed.url} got an ID, a token batch and a gRPC-web answer; ${refused.url} was refused all three`);
});
