// Test helpers: real `idmint serve` processes on free loopback ports with temporary data
// directories (killed by their own PIDs), and small fake servers for the failure cases a real
// server does not produce on demand.

import { spawn, execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import net from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");

/** The idmint binary: $IDMINT_BIN, else target/debug/idmint (scripts/test-web builds it). */
export function idmintBinary() {
  const path = process.env.IDMINT_BIN ?? join(REPO, "target/debug/idmint");
  if (!existsSync(path)) {
    throw new Error(`no idmint binary at ${path}: run \`cargo build -p idmint-cli\` (scripts/test-web does) or set IDMINT_BIN`);
  }
  return path;
}

/** A free loopback port (bound and released). */
export function freePort() {
  return new Promise((resolvePort, reject) => {
    const server = net.createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolvePort(port));
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Starts `idmint serve` with a TOML configuration on a free port and waits until /readyz
 * answers 200 (at most 15 s). Returns { url, port, pid, stop(), kill(), log() }.
 */
export async function startIdmint({ toml = "", args = [] } = {}) {
  const dir = mkdtempSync(join(tmpdir(), "idmint-js-test-"));
  const config = join(dir, "idmint.toml");
  writeFileSync(config, toml);
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child = spawn(
    idmintBinary(),
    ["serve", "--listen", `127.0.0.1:${port}`, "--data-dir", join(dir, "data"), "--config", config, "--log", "warn", "--shutdown-delay-ms", "0", ...args],
    { stdio: ["ignore", "ignore", "pipe"], env: { PATH: process.env.PATH ?? "/usr/bin:/bin" } },
  );
  let stderr = "";
  child.stderr.on("data", (chunk) => (stderr += chunk));
  let exited = false;
  const exit = new Promise((r) => child.on("exit", (code, signal) => { exited = true; r({ code, signal }); }));
  const handle = {
    url,
    port,
    pid: child.pid,
    log: () => stderr,
    /** SIGTERM (the ordered shutdown), then SIGKILL after 5 s; removes the data directory. */
    async stop() {
      if (!exited) {
        process.kill(child.pid, "SIGTERM");
        const done = await Promise.race([exit, sleep(5000).then(() => null)]);
        if (done === null && !exited) process.kill(child.pid, "SIGKILL");
        await exit;
      }
      rmSync(dir, { recursive: true, force: true });
    },
    /** SIGKILL now: a server that dies without a word. */
    async kill() {
      if (!exited) process.kill(child.pid, "SIGKILL");
      await exit;
    },
  };
  const deadline = Date.now() + 15_000;
  for (;;) {
    if (exited) throw new Error(`idmint serve exited at start:\n${stderr}`);
    try {
      const response = await fetch(`${url}/readyz`);
      if (response.status === 200) return handle;
    } catch {}
    if (Date.now() > deadline) {
      await handle.stop();
      throw new Error(`idmint serve on ${url} was not ready within 15 s:\n${stderr}`);
    }
    await sleep(50);
  }
}

/** `idmint explain <layout>` as text. */
export function explain(layout) {
  return execFileSync(idmintBinary(), ["explain", layout], { encoding: "utf8" });
}

/**
 * A fake idmint on a free port: `handler(req, res, hits)` answers everything but
 * /v1/namespaces, which describes `namespaces`. `hits` counts requests per path.
 */
export async function fakeServer(handler, namespaces) {
  const hits = new Map();
  const server = createServer((req, res) => {
    const path = req.url.split("?")[0];
    hits.set(path, (hits.get(path) ?? 0) + 1);
    if (path === "/v1/namespaces") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ namespaces }));
      return;
    }
    handler(req, res, hits);
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}`,
    hits,
    close: () => new Promise((r) => { server.closeAllConnections(); server.close(r); }),
  };
}
