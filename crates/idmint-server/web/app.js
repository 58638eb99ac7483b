// @ts-check
// idmint's status page: polls /v1/status, draws each namespace's layout as `idmint explain`
// does, and decodes IDs through /v1/namespaces/{ns}/decode/{id}. Plain JavaScript, no
// dependencies, no build step: this file is what the server sends. The bearer token lives in
// `token` below and nowhere else (no storage, no URL).

/** @type {string} */
let token = "";
/** @type {Map<string, any>} layouts by namespace, fetched once */
const layouts = new Map();
/** @type {{wall_ms: number, counters: Map<string, any>} | null} */
let previous = null;
let paused = false;

const $ = (/** @type {string} */ id) => /** @type {HTMLElement} */ (document.getElementById(id));

/** Creates an element with text and attributes. */
function el(/** @type {string} */ tag, /** @type {Record<string,string>} */ attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  for (const child of children) node.append(child instanceof Node ? child : String(child));
  return node;
}

/** A number with thousands separators, as `idmint explain` writes them. */
function group(/** @type {number|bigint} */ n) {
  const digits = String(n);
  let out = "";
  for (let i = 0; i < digits.length; i++) {
    if (i > 0 && (digits.length - i) % 3 === 0) out += ",";
    out += digits[i];
  }
  return out;
}

/** Same-origin fetch; adds the token when the namespace needs one. */
async function api(/** @type {string} */ path, /** @type {boolean} */ auth = false) {
  /** @type {Record<string,string>} */
  const headers = { accept: "application/json" };
  if (auth && token) headers.authorization = `Bearer ${token}`;
  const response = await fetch(path, { headers, cache: "no-store", credentials: "omit" });
  const body = await response.json().catch(() => null);
  if (!response.ok) {
    const message = body?.error?.message ?? `HTTP ${response.status}`;
    throw Object.assign(new Error(message), { status: response.status });
  }
  return body;
}

// ---- the bit diagram, as crates/idmint-cli/src/explain.rs draws it ----

const MAX_ROW_WIDTH = 79;

/** @typedef {{content: string, left: string, right: string, weight: number}} Cell */

function minWidth(/** @type {Cell} */ c) {
  const edges = c.right === "" ? c.left.length : c.left.length + 1 + c.right.length;
  return Math.max(c.content.length + 2, edges);
}

/** @returns {Cell[]} */
function bitCells(/** @type {any[]} */ segments) {
  return segments.map((s) => ({
    content: `${s.label} (${s.msb - s.lsb + 1})`,
    left: String(s.msb),
    right: s.msb === s.lsb ? "" : String(s.lsb),
    weight: s.msb - s.lsb + 1,
  }));
}

/** @returns {Cell[]} */
function digitCells(/** @type {any[]} */ fields) {
  const digits = fields.map((f) => String(f.max).length);
  let low = digits.reduce((a, b) => a + b, 0);
  return fields.map((f, i) => {
    const n = digits[i];
    low -= n;
    return {
      content: `${f.name} (${f.min}..=${f.max})`,
      left: `10^${low + n - 1}`,
      right: n === 1 ? "" : `10^${low}`,
      weight: n,
    };
  });
}

/** Widths adding up to `total`, proportional to the weights, none below a cell's minimum. */
function stretch(/** @type {Cell[]} */ cells, /** @type {number} */ total) {
  const mins = cells.map(minWidth);
  const fixed = cells.map(() => false);
  for (;;) {
    const fixedWidth = mins.reduce((a, m, i) => a + (fixed[i] ? m : 0), 0);
    const freeWeight = cells.reduce((a, c, i) => a + (fixed[i] ? 0 : c.weight), 0);
    const perWeight = Math.max(0, total - fixedWidth) / Math.max(1, freeWeight);
    let changed = false;
    cells.forEach((c, i) => {
      if (!fixed[i] && mins[i] >= c.weight * perWeight) {
        fixed[i] = true;
        changed = true;
      }
    });
    if (!changed) {
      const widths = cells.map((c, i) => (fixed[i] ? mins[i] : Math.max(mins[i], Math.floor(c.weight * perWeight))));
      const used = widths.reduce((a, b) => a + b, 0);
      if (used < total && widths.length > 0) {
        let widest = 0;
        widths.forEach((w, i) => { if (w >= widths[widest]) widest = i; });
        widths[widest] += total - used;
      }
      return widths;
    }
  }
}

function center(/** @type {string} */ text, /** @type {number} */ width) {
  const pad = Math.max(0, width - text.length);
  const left = Math.floor(pad / 2);
  return " ".repeat(left) + text + " ".repeat(pad - left);
}

function drawRow(/** @type {Cell[]} */ cells) {
  const widths = stretch(cells, Math.max(0, MAX_ROW_WIDTH - (1 + cells.length)));
  let numbers = " ", border = "+", middle = "|";
  cells.forEach((c, i) => {
    const w = widths[i];
    const gap = w - c.left.length;
    numbers += c.left + c.right.padStart(gap) + " ";
    border += "-".repeat(w) + "+";
    middle += center(c.content, w) + "|";
  });
  return `${numbers.trimEnd()}\n${border}\n${middle}\n${border}\n`;
}

function draw(/** @type {Cell[]} */ cells) {
  /** @type {Cell[][]} */
  const rows = [];
  let start = 0, width = 1;
  cells.forEach((c, i) => {
    const w = minWidth(c) + 1;
    if (i > start && width + w > MAX_ROW_WIDTH) {
      rows.push(cells.slice(start, i));
      start = i;
      width = 1;
    }
    width += w;
  });
  rows.push(cells.slice(start));
  return rows.map(drawRow).join("\n");
}

/** The heading line and the diagram of `idmint explain <layout>`. */
function diagram(/** @type {any} */ layout) {
  if (layout.segments) {
    return `${layout.layout}: ${layout.bits}-bit id, most significant bit first\n\n${draw(bitCells(layout.segments))}`;
  }
  const cells = digitCells(layout.fields);
  const digits = cells.reduce((a, c) => a + c.weight, 0);
  return `${layout.layout}: ${layout.bits}-bit id read as ${digits} decimal digits, most significant digit first\n\n${draw(cells)}`;
}

// ---- status ----

function duration(/** @type {number} */ ms) {
  const abs = Math.abs(ms);
  if (abs < 10_000) return `${group(Math.round(ms))} ms`;
  if (abs < 7_200_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${(ms / 3_600_000).toFixed(1)} h`;
}

function rate(/** @type {number} */ perSecond) {
  return perSecond >= 100 ? group(Math.round(perSecond)) : perSecond.toFixed(1);
}

/** @type {Record<string,string>} */
const CLAIMS = {
  held: "held (this server owns the generator ID)",
  waiting: "none: waiting for a free generator ID",
  counter: "taken from the persistent counters at start",
  "none-needed": "none needed (IDs come from the store)",
};

function namespaceCard(/** @type {any} */ ns, /** @type {any} */ status, /** @type {any} */ rates) {
  const card = el("article", { class: "card", "data-namespace": ns.name, "aria-labelledby": `ns-${ns.name}` });
  card.append(el("h3", { id: `ns-${ns.name}` }, ns.name, ns.auth ? el("span", { class: "badge" }, "token") : ""));
  const dl = el("dl");
  const row = (/** @type {string} */ term, /** @type {any} */ value, /** @type {string} */ cls = "") => {
    dl.append(el("dt", {}, term), el("dd", cls ? { class: cls } : {}, value));
  };
  row("ready", ns.ready ? "ready" : "not ready", ns.ready ? "ready" : "not-ready");
  row("layout", `${ns.layout} (${ns.id_bits}-bit${ns.js_safe ? ", fits a JS number" : ""})`);
  row("source", ns.source);
  row("ID text", ns.type_prefix ? `${ns.default_format}, ${ns.type_prefix}_…` : ns.default_format);
  row("generator ID", ns.generator_id == null ? "—" : `${ns.generator_id} of 0..${ns.generators - 1}`);
  row("claim", CLAIMS[ns.claim] ?? ns.claim);
  if (ns.mark_ms != null) {
    const ahead = ns.mark_ms - status.wall_ms;
    const meter = el("meter", { min: "0", max: String(status.window_ms), value: String(Math.max(0, ahead)),
      "aria-label": `high-water mark ahead of the wall clock, ms (window ${status.window_ms} ms)` });
    const text = ahead >= 0 ? `${duration(ahead)} ahead of the wall clock` : `${duration(-ahead)} behind the wall clock`;
    row("high-water mark", el("span", {}, new Date(ns.mark_ms).toISOString(), el("br"), text, el("br"), meter),
      ahead >= 0 ? "" : "warn");
  } else {
    row("high-water mark", "— (no clock window for this source)");
  }
  row("IDs/s", rates ? rate(rates.ids) : "…");
  row("requests/s", rates ? rate(rates.requests) : "…");
  row("IDs issued", group(ns.counters.ids_issued));
  const troubles = ["claims_lost", "mark_failures", "store_failures", "clock_backward", "window_exhausted"]
    .filter((k) => ns.counters[k] > 0).map((k) => `${k.replace(/_/g, " ")}: ${ns.counters[k]}`);
  if (troubles.length) row("events", troubles.join(", "), "warn");
  row("token", ns.auth ? "required" : "none");
  card.append(dl);
  return card;
}

async function refresh() {
  if (paused) return;
  let status;
  try {
    status = await api("/v1/status");
  } catch (e) {
    $("server-state").textContent = `Cannot read /v1/status: ${/** @type {Error} */ (e).message}`;
    $("server-state").className = "error";
    return;
  }
  const state = $("server-state");
  state.textContent = `${status.ready ? "Ready" : "Not ready"} · server clock ${status.time}`;
  state.className = status.ready ? "ready" : "not-ready";
  const counters = new Map(status.namespaces.map((/** @type {any} */ ns) => [ns.name, ns.counters]));
  const dt = previous ? (status.wall_ms - previous.wall_ms) / 1000 : 0;
  const cards = status.namespaces.map((/** @type {any} */ ns) => {
    const before = previous?.counters.get(ns.name);
    const rates = before && dt > 0
      ? { ids: (ns.counters.ids_issued - before.ids_issued) / dt, requests: (ns.counters.requests - before.requests) / dt }
      : null;
    return namespaceCard(ns, status, rates);
  });
  $("namespaces").replaceChildren(...cards);
  previous = { wall_ms: status.wall_ms, counters };
  await syncNamespaces(status.namespaces);
}

/** Fills the namespace list of the decode box and the layout explanations, once per name. */
async function syncNamespaces(/** @type {any[]} */ namespaces) {
  const select = /** @type {HTMLSelectElement} */ ($("decode-ns"));
  for (const ns of namespaces) {
    if (layouts.has(ns.name)) continue;
    const layout = await api(`/v1/namespaces/${encodeURIComponent(ns.name)}/layout`);
    layouts.set(ns.name, { ...layout, auth: ns.auth });
    select.append(el("option", { value: ns.name }, `${ns.name} (${ns.layout}${ns.auth ? ", token" : ""})`));
    $("layouts").append(explanation(ns.name, layout));
  }
}

function explanation(/** @type {string} */ name, /** @type {any} */ layout) {
  const c = layout.capacity;
  const rows = [];
  if (c.tick_ms > 0 && c.start) {
    rows.push(["first time", c.start], ["runs out", c.end ?? (c.wrap_ms ? "never: the time field wraps around" : "beyond 64-bit Unix ms")],
      ["tick", c.tick_ms % 1000 === 0 ? `${c.tick_ms / 1000} s` : `${c.tick_ms} ms`],
      ["ids per tick", `${group(c.ids_per_tick)} per generator`],
      ["ids per second", `${group(c.ids_per_second_per_generator)} per generator`]);
  } else {
    rows.push(["time", "none: the layout has no clock"], ["ids", `${group(c.ids_per_tick)} per generator in all (a counter)`]);
  }
  rows.push(["generators", group(c.generators)]);
  const table = el("table", {}, el("caption", { class: "help" }, "capacity"),
    ...rows.map(([k, v]) => el("tr", {}, el("th", { scope: "row" }, k), el("td", {}, v))));
  const fields = el("table", {}, el("caption", { class: "help" }, "fields"),
    el("tr", {}, ...["field", "bits", "range", "role"].map((h) => el("th", { scope: "col" }, h))),
    ...layout.fields.map((/** @type {any} */ f) => el("tr", {}, el("td", { class: "mono" }, f.name), el("td", {}, f.bits),
      el("td", {}, f.text ?? `${f.min}..=${f.max}`), el("td", {}, f.role))));
  return el("details", { "data-layout": name },
    el("summary", {}, `${name}: ${layout.layout}`),
    el("p", {}, layout.description ?? "a custom layout"),
    el("pre", { class: "diagram", "aria-label": `bit diagram of ${layout.layout}` }, diagram(layout)),
    table, fields);
}

// ---- decode ----

async function decode(/** @type {Event} */ event) {
  event.preventDefault();
  const ns = /** @type {HTMLSelectElement} */ ($("decode-ns")).value;
  const id = /** @type {HTMLInputElement} */ ($("decode-id")).value.trim();
  const out = $("decode-result");
  if (!ns || !id) {
    out.replaceChildren(el("p", { class: "error" }, "Choose a namespace and paste an ID."));
    return;
  }
  const layout = layouts.get(ns);
  try {
    const decoded = await api(`/v1/namespaces/${encodeURIComponent(ns)}/decode/${encodeURIComponent(id)}`, true);
    const widths = new Map((layout?.fields ?? []).map((/** @type {any} */ f) => [f.name, f.bits]));
    const binary = (/** @type {string} */ name, /** @type {any} */ value) =>
      Number.isSafeInteger(value) && widths.has(name) ? value.toString(2).padStart(widths.get(name), "0") : "";
    const rows = Object.entries(decoded.fields).map(([name, value]) =>
      el("tr", { "data-field": name }, el("th", { scope: "row", class: "mono" }, name), el("td", { class: "mono" }, String(value)),
        el("td", { class: "mono bits" }, binary(name, value))));
    out.replaceChildren(
      el("h3", {}, `${decoded.id} in ${ns} (${decoded.layout})`),
      el("table", { id: "decoded-fields" }, el("caption", { class: "help" }, "fields"),
        el("tr", {}, ...["field", "value", "bits"].map((h) => el("th", { scope: "col" }, h))), ...rows),
      el("p", {}, "time: ", el("strong", { id: "decoded-time" }, decoded.time ?? "none (this layout has no clock)")),
      el("pre", { class: "diagram", id: "decoded-diagram", "aria-label": "bit diagram" }, layout ? diagram(layout) : ""));
  } catch (e) {
    const err = /** @type {any} */ (e);
    const hint = err.status === 401 ? " Type this namespace's token in the Token field above." :
      err.status === 403 ? " The token is not this namespace's." : "";
    out.replaceChildren(el("p", { class: "error", role: "alert" }, `${err.message}.${hint}`));
  }
}

async function fetchId() {
  const ns = /** @type {HTMLSelectElement} */ ($("decode-ns")).value;
  try {
    const body = await api(`/v1/namespaces/${encodeURIComponent(ns)}/next`, true);
    /** @type {HTMLInputElement} */ ($("decode-id")).value = String(body.id);
    /** @type {HTMLFormElement} */ ($("decode-form")).requestSubmit();
  } catch (e) {
    $("decode-result").replaceChildren(el("p", { class: "error", role: "alert" }, /** @type {Error} */ (e).message));
  }
}

$("token").addEventListener("input", (e) => { token = /** @type {HTMLInputElement} */ (e.target).value; });
$("token-form").addEventListener("submit", (e) => e.preventDefault());
$("token-clear").addEventListener("click", () => {
  token = "";
  /** @type {HTMLInputElement} */ ($("token")).value = "";
});
$("pause").addEventListener("change", (e) => { paused = /** @type {HTMLInputElement} */ (e.target).checked; });
$("decode-form").addEventListener("submit", decode);
$("decode-fetch").addEventListener("click", fetchId);
refresh();
setInterval(refresh, 1000);
