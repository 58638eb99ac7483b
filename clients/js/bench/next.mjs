// Sustained `next()` rate of @idmint/client against a local `idmint serve`, beside the Rust
// client's (`idmint bench client`) against the same server in the same run.
//
//   node bench/next.mjs [--seconds 8] [--prefetch 100000] [--low-water 50000] [--ids string|bigint]
//
// Uses $IDMINT_BIN (default target/release/idmint, else target/debug/idmint). The server has
// the `wide` namespace of scripts/load-bench (16-bit sequence: 65,536 IDs per ms), so that the
// generator is not what limits. Every ID handed out is checked: strictly increasing, so no
// duplicates. One line of JSON per client at the end.

import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";

import { createClient } from "../dist/index.js";
import { REPO, startIdmint } from "../test/harness.mjs";

const { values } = parseArgs({
  options: {
    seconds: { type: "string", default: "8" },
    warmup: { type: "string", default: "1" },
    prefetch: { type: "string", default: "100000" },
    "low-water": { type: "string", default: "50000" },
    ids: { type: "string", default: "string" },
    "no-rust": { type: "boolean", default: false },
  },
});
if (!process.env.IDMINT_BIN) {
  const release = join(REPO, "target/release/idmint");
  process.env.IDMINT_BIN = existsSync(release) ? release : join(REPO, "target/debug/idmint");
}
const seconds = Number(values.seconds);
const warmup = Number(values.warmup);
const prefetch = Number(values.prefetch);
const lowWater = Number(values["low-water"]);

const toml = `
[server]
[[server.namespaces]]
name = "wide"
[server.namespaces.custom_layout]
name = "wide63"
bits = 63
epoch = "2024-01-01T00:00:00Z"
tick_ms = 1
[[server.namespaces.custom_layout.fields]]
name = "timestamp"
bits = 41
role = "time"
[[server.namespaces.custom_layout.fields]]
name = "generator"
bits = 6
role = "node"
[[server.namespaces.custom_layout.fields]]
name = "sequence"
bits = 16
role = "sequence"
`;

const server = await startIdmint({ toml });
try {
  const client = createClient({ endpoints: [server.url], namespace: "wide", prefetch, lowWater, ids: values.ids });
  const cpu0 = process.cpuUsage();
  let last = values.ids === "bigint" ? -1n : "";
  const checkString = (id) => {
    if (!(id.length > last.length || (id.length === last.length && id > last))) throw new Error(`${id} after ${last}`);
    last = id;
  };
  const checkBig = (id) => {
    if (!(id > last)) throw new Error(`${id} after ${last}`);
    last = id;
  };
  const check = values.ids === "bigint" ? checkBig : checkString;
  const warmEnd = performance.now() + warmup * 1000;
  while (performance.now() < warmEnd) {
    for (let i = 0; i < 1000; i++) check(await client.next());
  }
  let calls = 0;
  const start = performance.now();
  const end = start + seconds * 1000;
  while (performance.now() < end) {
    for (let i = 0; i < 1000; i++) check(await client.next());
    calls += 1000;
  }
  const elapsed = (performance.now() - start) / 1000;
  const cpu = process.cpuUsage(cpu0);
  client.close();
  const js = {
    client: `@idmint/client (node ${process.version}, ids: ${values.ids})`,
    server: process.env.IDMINT_BIN,
    namespace: "wide",
    prefetch,
    low_water: lowWater,
    seconds: Number(elapsed.toFixed(2)),
    calls,
    ids_per_second: Math.round(calls / elapsed),
    ns_per_call: Number(((elapsed * 1e9) / calls).toFixed(1)),
    client_cpu: Number(((cpu.user + cpu.system) / 1e6 / (elapsed + warmup)).toFixed(2)),
    checked: "every id strictly increasing (0 duplicates)",
  };
  console.log(JSON.stringify(js));
  if (!values["no-rust"]) {
    // The Rust client against the same server, same namespace and prefetch.
    const out = execFileSync(
      process.env.IDMINT_BIN,
      ["bench", "client", "--url", server.url, "--namespace", "wide", "--prefetch", String(prefetch),
        "--low-water", String(lowWater), "--duration", String(seconds), "--warmup", String(warmup), "--json"],
      { encoding: "utf8" },
    );
    console.log(out.trim().split("\n").pop());
  }
} finally {
  await server.stop();
}
