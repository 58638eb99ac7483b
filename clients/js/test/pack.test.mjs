// `npm pack` makes a package that a TypeScript project can use: its tarball holds the JS and
// the type declarations, a consumer type-checks against them (and a wrong ID type is caught),
// and Node imports it by its name.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const PACKAGE = join(dirname(fileURLToPath(import.meta.url)), "..");
const TSC = join(PACKAGE, "node_modules/typescript/bin/tsc");

test("npm pack ships dist/*.js with their .d.ts, and a TypeScript consumer type-checks against them", () => {
  const dir = mkdtempSync(join(tmpdir(), "idmint-pack-"));
  try {
    const out = execFileSync("npm", ["pack", "--json", "--pack-destination", dir], { cwd: PACKAGE, encoding: "utf8" });
    const [{ filename, files }] = JSON.parse(out.slice(out.indexOf("[")));
    const paths = files.map((f) => f.path).sort();
    for (const needed of ["dist/index.js", "dist/index.d.ts", "dist/errors.d.ts", "dist/order.d.ts", "package.json", "README.md"]) {
      assert.ok(paths.includes(needed), `${needed} missing from ${paths}`);
    }
    assert.ok(paths.every((p) => !p.startsWith("test") && !p.startsWith("src/") && !p.startsWith("node_modules")), `${paths}`);

    const project = join(dir, "consumer");
    const installed = join(project, "node_modules/@idmint/client");
    mkdirSync(installed, { recursive: true });
    execFileSync("tar", ["-xzf", join(dir, filename), "-C", installed, "--strip-components=1"]);
    writeFileSync(join(project, "package.json"), JSON.stringify({ type: "module", private: true }));
    writeFileSync(
      join(project, "tsconfig.json"),
      JSON.stringify({ compilerOptions: { module: "NodeNext", moduleResolution: "NodeNext", target: "ES2022", strict: true, noEmit: true, lib: ["ES2022", "DOM"] } }),
    );
    const good = `import { createClient, IdMintError, type Client } from "@idmint/client";
const s: Client<string> = createClient({ endpoints: ["http://127.0.0.1:1"] });
const b = createClient({ endpoints: ["http://127.0.0.1:1"], ids: "bigint" });
const n = createClient({ endpoints: ["http://127.0.0.1:1"], ids: "number" });
export async function f(): Promise<[string, bigint, number]> { return [await s.next(), await b.next(), await n.next()]; }
export const kind = (e: unknown) => (e instanceof IdMintError ? e.kind : null);
`;
    writeFileSync(join(project, "good.ts"), good);
    execFileSync("node", [TSC, "-p", project], { cwd: project, encoding: "utf8" });
    // Negative control: a bigint client's IDs are not strings.
    writeFileSync(join(project, "bad.ts"), `import { createClient } from "@idmint/client";
export async function g(): Promise<string> { return createClient({ endpoints: ["http://127.0.0.1:1"], ids: "bigint" }).next(); }
`);
    assert.throws(() => execFileSync("node", [TSC, "-p", project], { cwd: project, encoding: "utf8", stdio: "pipe" }), (e) =>
      /bigint.*string|Type 'bigint' is not assignable/s.test(String(e.stdout)),
    );
    // Node imports the packed package by its name.
    writeFileSync(join(project, "run.mjs"), `import { createClient } from "@idmint/client";
const c = createClient({ endpoints: ["http://127.0.0.1:1"] }); console.log(c.namespace, c.mode);`);
    assert.equal(execFileSync("node", [join(project, "run.mjs")], { cwd: project, encoding: "utf8" }).trim(), "default string");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
