/**
 * `@idmint/client`: IDs from a set of idmint servers, for Node 20+ and browsers, with no
 * runtime dependencies (it uses the platform's `fetch`). It mirrors the Rust crate
 * `idmint-client`:
 *
 * - **Round-robin with failover.** Each request goes to the next endpoint in turn. A failure
 *   that is safe to retry (no connection, no answer within `timeoutMs`, a 502, 503 or 504)
 *   ejects that endpoint for a while (1 s, doubling per failure, at most 30 s) and the request
 *   moves on after a small jittered backoff (5 ms doubling, at most 250 ms), for up to
 *   `attempts` attempts. A `Retry-After` is honoured up to `maxRetryAfterMs`.
 * - **Never retried:** every other 4xx and 5xx (`Rejected`, with the server's code).
 * - **No ID twice.** Each batch is handed out once, index by index; retries can only lose IDs
 *   (a gap), never repeat one.
 * - **Checked.** Every batch must be strictly increasing where the namespace promises it (else
 *   free of repeats), and the prefetched batches of one endpoint must keep increasing while it
 *   holds the same generator ID; otherwise the batch is dropped (`NotMonotonic`).
 * - **Prefetch.** `next()` takes IDs from a buffer of `prefetch` IDs, refilled in the
 *   background when `lowWater` are left.
 * - **IDs** are decimal strings by default, `bigint` with `ids: "bigint"`, and JavaScript
 *   numbers with `ids: "number"`, which only `js53` namespaces allow.
 *
 * @example
 * ```ts
 * import { createClient } from "@idmint/client";
 * const client = createClient({ endpoints: ["http://127.0.0.1:8080"], namespace: "orders" });
 * const id = await client.next(); // "2125168131239313408"
 * ```
 */

import { IdMintError } from "./errors.js";
import { type NamespaceInfo, type Order, checkBatch, compareIds, orderOf } from "./order.js";

export { IdMintError, type ErrorKind } from "./errors.js";
export { type NamespaceInfo, type Order, orderOf, compareDecimal } from "./order.js";

/** How IDs are handed out. */
export type IdMode = "string" | "bigint" | "number";

/**
 * The text form the server writes IDs in (its `format=` parameter). `"namespace"` (the default
 * for `ids: "string"`) takes the namespace's own: a TypeID for a namespace with a `type_prefix`,
 * a hyphenated UUID for `uuid7`. `ids: "bigint"` and `"number"` need `"decimal"`.
 *
 * ```ts
 * const users = createClient({ endpoints: ["http://127.0.0.1:8080"], namespace: "users", format: "uuid" });
 * ```
 */
export type IdFormat = "namespace" | "decimal" | "uuid" | "ulid" | "typeid" | "hex" | "base32" | "base62";

/** The JavaScript type of an ID in each mode. */
export type IdOf<M extends IdMode> = M extends "bigint" ? bigint : M extends "number" ? number : string;

/** The options of {@link createClient}. Only `endpoints` is required. */
export interface ClientOptions<M extends IdMode = "string"> {
  /** Base URLs of the servers, e.g. `http://10.0.0.1:8080`: round-robin with failover. */
  endpoints: readonly string[];
  /** The namespace. Default: `default`. */
  namespace?: string;
  /** The namespace's bearer token. Default: none. */
  token?: string;
  /** How IDs are handed out. Default: `"string"`. */
  ids?: M;
  /** The text form of string IDs (see {@link IdFormat}); default `"namespace"`, `"decimal"` for bigint and number. */
  format?: IdFormat;
  /** How long one request may take, in ms. Default: 2000. */
  timeoutMs?: number;
  /** How many attempts one call makes before `Unavailable`. Default: 5. */
  attempts?: number;
  /** How many IDs one refill of the buffer asks for (1 to 100,000). Default: 100. */
  prefetch?: number;
  /** Refill when this many buffered IDs are left (0 to `prefetch - 1`). Default: prefetch / 4. */
  lowWater?: number;
  /** The longest `Retry-After` honoured, in ms. Default: 2000. */
  maxRetryAfterMs?: number;
  /** The `fetch` to use. Default: `globalThis.fetch`. */
  fetch?: typeof fetch;
}

/** The largest batch an idmint server answers by default (its `max_batch`). */
export const MAX_BATCH = 100_000;

const EJECT_MIN_MS = 1_000;
const EJECT_MAX_MS = 30_000;
const BACKOFF_MIN_MS = 5;
const BACKOFF_MAX_MS = 250;

interface Endpoint {
  url: string;
  failures: number;
  ejectedUntil: number;
  info: NamespaceInfo | null;
  /** The last ID of the last prefetched batch from this endpoint. */
  lastId: string | null;
}

/** A retryable failure of one attempt. */
class Retryable {
  constructor(
    readonly error: IdMintError,
    readonly retryAfterMs: number | null,
  ) {}
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Runs `f` as a macrotask: after pending I/O (Node's `setImmediate`; a `MessageChannel` in
 * browsers, which `setTimeout`'s 4 ms clamp would slow down).
 */
const macrotask: (f: () => void) => void = (() => {
  const immediate = (globalThis as { setImmediate?: (f: () => void) => unknown }).setImmediate;
  if (typeof immediate === "function") return (f: () => void) => void immediate(f);
  if (typeof MessageChannel === "function") {
    const queue: (() => void)[] = [];
    const channel = new MessageChannel();
    channel.port1.onmessage = () => queue.shift()?.();
    return (f: () => void) => {
      queue.push(f);
      channel.port2.postMessage(null);
    };
  }
  return (f: () => void) => void setTimeout(f, 0);
})();

/**
 * While a refill is in flight, every this many `next()` calls from the buffer resolve as a
 * macrotask instead of a microtask: a caller that awaits `next()` in a tight loop never leaves
 * the microtask queue otherwise, so the refill's response would not be read until the buffer
 * ran dry, and refilling would not overlap with handing out.
 */
const YIELD_EVERY = 512;

/** Reads a `Retry-After` given in seconds. */
function retryAfterMs(value: string | null): number | null {
  if (value === null || !/^[0-9]{1,6}$/.test(value.trim())) return null;
  return Number(value.trim()) * 1000;
}

/** The largest shard key: HotGuid's shard key is an unsigned 32-bit integer. */
export const MAX_SHARD_KEY = 4_294_967_295;

/** A shard key as given: a whole number from 0 to {@link MAX_SHARD_KEY}, else `InvalidOptions`. */
function checkShardKey(shardKey: number): number {
  if (!Number.isInteger(shardKey) || shardKey < 0 || shardKey > MAX_SHARD_KEY) {
    throw new IdMintError("InvalidOptions", `shardKey must be a whole number from 0 to ${MAX_SHARD_KEY}, not ${String(shardKey)}`);
  }
  return shardKey;
}

/** Creates a client. Throws `InvalidOptions` for wrong options; contacts no server yet. */
export function createClient<M extends IdMode = "string">(options: ClientOptions<M>): Client<IdOf<M>> {
  return new Client<IdOf<M>>(options as ClientOptions<IdMode>);
}

/** A client of a set of idmint servers, for one namespace. Create it with {@link createClient}. */
export class Client<T extends string | bigint | number = string> {
  readonly namespace: string;
  readonly mode: IdMode;
  readonly format: IdFormat;
  private readonly endpoints: Endpoint[];
  private readonly token: string | undefined;
  private readonly timeoutMs: number;
  private readonly attempts: number;
  private readonly prefetchSize: number;
  private readonly lowWater: number;
  private readonly maxRetryAfterMs: number;
  private readonly fetchImpl: typeof fetch;
  private readonly convert: (id: string) => T;
  private cursor = 0;
  private fingerprint: string | null = null;
  private order: Order | null = null;
  private buffer: T[] = [];
  private position = 0;
  private readonly ready: T[][] = [];
  private refill: Promise<void> | null = null;
  private sinceYield = 0;
  private closed = false;
  private readonly aborts = new Set<AbortController>();

  /** Use {@link createClient}, which types the IDs by `ids`. */
  constructor(options: ClientOptions<IdMode>) {
    const bad = (message: string) => new IdMintError("InvalidOptions", message);
    if (!options || !Array.isArray(options.endpoints) || options.endpoints.length === 0) {
      throw bad("`endpoints` must list at least one server URL");
    }
    this.endpoints = options.endpoints.map((raw) => {
      let url: URL;
      try {
        url = new URL(raw);
      } catch {
        throw bad(`endpoint \`${raw}\` is not a URL`);
      }
      if (url.protocol !== "http:" && url.protocol !== "https:") {
        throw bad(`endpoint \`${raw}\` must be http:// or https://`);
      }
      return { url: url.href.replace(/\/+$/, ""), failures: 0, ejectedUntil: 0, info: null, lastId: null };
    });
    this.namespace = options.namespace ?? "default";
    if (!/^[a-z0-9_-]{1,64}$/.test(this.namespace)) {
      throw bad(`namespace \`${this.namespace}\` must be 1 to 64 characters of a-z, 0-9, - or _`);
    }
    this.mode = options.ids ?? "string";
    if (!["string", "bigint", "number"].includes(this.mode)) {
      throw bad("`ids` must be \"string\", \"bigint\" or \"number\"");
    }
    this.format = options.format ?? (this.mode === "string" ? "namespace" : "decimal");
    if (!["namespace", "decimal", "uuid", "ulid", "typeid", "hex", "base32", "base62"].includes(this.format)) {
      throw bad("`format` must be one of namespace, decimal, uuid, ulid, typeid, hex, base32, base62");
    }
    if (this.mode !== "string" && this.format !== "decimal") {
      throw bad(`\`format: "${this.format}"\` needs ids: "string"`);
    }
    const int = (value: number | undefined, fallback: number, min: number, max: number, name: string) => {
      const v = value ?? fallback;
      if (!Number.isInteger(v) || v < min || v > max) throw bad(`\`${name}\` must be a whole number from ${min} to ${max}`);
      return v;
    };
    this.token = options.token;
    if (this.token !== undefined && (this.token === "" || /[\r\n]/.test(this.token))) {
      throw bad("`token` must be non-empty and on one line");
    }
    this.timeoutMs = int(options.timeoutMs, 2000, 1, 600_000, "timeoutMs");
    this.attempts = int(options.attempts, 5, 1, 100, "attempts");
    this.prefetchSize = int(options.prefetch, 100, 1, MAX_BATCH, "prefetch");
    this.lowWater = int(options.lowWater, Math.floor(this.prefetchSize / 4), 0, this.prefetchSize - 1, "lowWater");
    this.maxRetryAfterMs = int(options.maxRetryAfterMs, 2000, 0, 600_000, "maxRetryAfterMs");
    const f = options.fetch ?? globalThis.fetch;
    if (typeof f !== "function") throw bad("no `fetch`: pass one in the options");
    this.fetchImpl = f.bind(globalThis);
    this.convert = (this.mode === "bigint" ? (id: string) => BigInt(id) : this.mode === "number" ? Number : (id: string) => id) as (
      id: string,
    ) => T;
  }

  /**
   * The next ID: from the buffer when it holds one (a refill starts in the background at the
   * low-water mark), else after the refill.
   */
  next(): Promise<T> {
    if (this.position < this.buffer.length) {
      const id = this.buffer[this.position++]!;
      if (this.refill !== null) {
        if (++this.sinceYield >= YIELD_EVERY) {
          this.sinceYield = 0;
          return new Promise((resolve) => macrotask(() => resolve(id)));
        }
      } else if (this.buffer.length - this.position <= this.lowWater && this.ready.length === 0) {
        this.startRefill();
      }
      return Promise.resolve(id);
    }
    return this.nextSlow();
  }

  private async nextSlow(): Promise<T> {
    for (;;) {
      if (this.closed) throw new IdMintError("Closed", "the client is closed");
      if (this.position < this.buffer.length) return this.next();
      const batch = this.ready.shift();
      if (batch !== undefined) {
        this.buffer = batch;
        this.position = 0;
        continue;
      }
      await (this.refill ?? this.startRefill());
    }
  }

  /** Starts one background refill; its failure reaches the `next()` calls that wait on it. */
  private startRefill(): Promise<void> {
    const refill = (async () => {
      try {
        const ids = await this.fetchBatch(this.prefetchSize, true);
        if (!this.closed) this.ready.push(ids);
      } finally {
        this.refill = null;
      }
    })();
    this.refill = refill;
    refill.catch(() => {}); // reported to the waiters of `next()`, not as unhandled
    return refill;
  }

  /** `count` IDs (1 to 100,000) in one request, bypassing the buffer. */
  async batch(count: number): Promise<T[]> {
    if (!Number.isInteger(count) || count < 1 || count > MAX_BATCH) {
      throw new IdMintError("InvalidOptions", `count must be a whole number from 1 to ${MAX_BATCH}`);
    }
    return this.fetchBatch(count, false);
  }

  /**
   * One ID of a `hot-guid` namespace with `shardKey` in it (HotGuid's `NewGuid(shardKey)`):
   * one request, bypassing the buffer, whose IDs carry the namespace's own key. `shardKey`
   * is a whole number from 0 to 4294967295; the server refuses a key outside the
   * namespace's `shard_keys`, and any key for another layout (`Rejected`, status 400).
   */
  async nextWithShardKey(shardKey: number): Promise<T> {
    const ids = await this.fetchBatch(1, false, checkShardKey(shardKey));
    return ids[0]!;
  }

  /** `count` IDs (1 to 100,000) of a `hot-guid` namespace with `shardKey` in each, in one request. */
  async batchWithShardKey(count: number, shardKey: number): Promise<T[]> {
    if (!Number.isInteger(count) || count < 1 || count > MAX_BATCH) {
      throw new IdMintError("InvalidOptions", `count must be a whole number from 1 to ${MAX_BATCH}`);
    }
    return this.fetchBatch(count, false, checkShardKey(shardKey));
  }

  /** What the endpoints say about the namespace (from the first that answers). */
  async info(): Promise<NamespaceInfo> {
    return this.call(async (endpoint) => this.endpointInfo(endpoint, false));
  }

  /** Stops the client: buffered IDs are dropped (a gap), requests in flight are aborted. */
  close(): void {
    this.closed = true;
    this.buffer = [];
    this.position = 0;
    this.ready.length = 0;
    for (const abort of this.aborts) abort.abort();
  }

  private async fetchBatch(count: number, prefetch: boolean, shardKey: number | null = null): Promise<T[]> {
    const key = shardKey === null ? "" : `&shard_key=${shardKey}`;
    const ids = await this.call(async (endpoint) => {
      const info = await this.endpointInfo(endpoint, false);
      const format = this.format === "namespace" ? info.default_format : this.format;
      const path = `/v1/namespaces/${this.namespace}/batch?count=${count}&format=${encodeURIComponent(format)}${key}`;
      const body = (await this.request(endpoint, path)) as { ids?: unknown };
      const ids = body?.ids;
      if (!Array.isArray(ids) || ids.length !== count) {
        throw new IdMintError("BadResponse", `${endpoint.url} answered a batch of ${count} without ${count} ids`, {
          endpoint: endpoint.url,
        });
      }
      const order = this.order ?? orderOf(info);
      const bad = checkBatch(ids as string[], order, format);
      if (bad !== null) {
        throw new IdMintError("NotMonotonic", `${endpoint.url} answered a batch out of order: ${bad[0]} then ${bad[1]}`, {
          endpoint: endpoint.url,
        });
      }
      if (prefetch && order === "increasing") {
        const first = ids[0] as string;
        if (endpoint.lastId !== null && compareIds(first, endpoint.lastId, format) <= 0) {
          const before = info.generator_id;
          const now = await this.endpointInfo(endpoint, true);
          if (now.generator_id === before) {
            throw new IdMintError(
              "NotMonotonic",
              `${endpoint.url} went backwards on generator ID ${before}: ${first} after ${endpoint.lastId}`,
              { endpoint: endpoint.url },
            );
          }
        }
        endpoint.lastId = ids[ids.length - 1] as string;
      }
      return ids as string[];
    });
    if (this.mode === "string") return ids as T[];
    return ids.map(this.convert);
  }

  /** The namespace as one endpoint describes it, read once (or again with `fresh`). */
  private async endpointInfo(endpoint: Endpoint, fresh: boolean): Promise<NamespaceInfo> {
    if (endpoint.info !== null && !fresh) return endpoint.info;
    const body = (await this.request(endpoint, "/v1/namespaces")) as { namespaces?: NamespaceInfo[] };
    if (!Array.isArray(body?.namespaces)) {
      throw new IdMintError("BadResponse", `${endpoint.url}/v1/namespaces has no namespace list`, { endpoint: endpoint.url });
    }
    const info = body.namespaces.find((ns) => ns.name === this.namespace);
    if (info === undefined) {
      throw new IdMintError("Rejected", `${endpoint.url} has no namespace \`${this.namespace}\``, {
        status: 404,
        code: "unknown_namespace",
        endpoint: endpoint.url,
      });
    }
    if (this.fingerprint === null) {
      this.fingerprint = info.fingerprint;
      this.order = orderOf(info);
    } else if (this.fingerprint !== info.fingerprint) {
      throw new IdMintError(
        "LayoutMismatch",
        `${endpoint.url} describes namespace \`${this.namespace}\` as ${info.fingerprint}, another endpoint as ${this.fingerprint}`,
        { endpoint: endpoint.url },
      );
    }
    if (this.mode === "number" && !info.js_safe) {
      throw new IdMintError(
        "NotJsSafe",
        `namespace \`${this.namespace}\` uses layout \`${info.layout}\`, whose IDs do not fit a JavaScript number; use ids: "string" or "bigint"`,
        { endpoint: endpoint.url },
      );
    }
    endpoint.info = info;
    return info;
  }

  /** One HTTP GET with the timeout and the token; retryable failures become {@link Retryable}. */
  private async request(endpoint: Endpoint, path: string): Promise<unknown> {
    const abort = new AbortController();
    this.aborts.add(abort);
    const timer = setTimeout(() => abort.abort(), this.timeoutMs);
    const headers: Record<string, string> = { accept: "application/json" };
    if (this.token !== undefined) headers.authorization = `Bearer ${this.token}`;
    try {
      let response: Response;
      try {
        response = await this.fetchImpl(endpoint.url + path, { headers, signal: abort.signal });
      } catch (cause) {
        if (this.closed) throw new IdMintError("Closed", "the client is closed");
        const timedOut = abort.signal.aborted;
        throw new Retryable(
          new IdMintError(
            timedOut ? "Timeout" : "Unavailable",
            timedOut ? `${endpoint.url} did not answer within ${this.timeoutMs} ms` : `cannot reach ${endpoint.url}`,
            { endpoint: endpoint.url, cause },
          ),
          null,
        );
      }
      let body: unknown;
      try {
        body = await response.json();
      } catch (cause) {
        if (abort.signal.aborted && !this.closed) {
          throw new Retryable(
            new IdMintError("Timeout", `${endpoint.url} did not answer within ${this.timeoutMs} ms`, { endpoint: endpoint.url, cause }),
            null,
          );
        }
        body = null;
      }
      if (response.ok) {
        if (body === null) {
          throw new IdMintError("BadResponse", `${endpoint.url}${path} answered no JSON`, { endpoint: endpoint.url });
        }
        return body;
      }
      const detail = (body as { error?: { code?: string; message?: string } } | null)?.error;
      const message = detail?.message ?? `HTTP ${response.status}`;
      const error = new IdMintError(response.status >= 502 && response.status <= 504 ? "Unavailable" : "Rejected", message, {
        status: response.status,
        ...(detail?.code === undefined ? {} : { code: detail.code }),
        endpoint: endpoint.url,
      });
      if (response.status >= 502 && response.status <= 504) {
        throw new Retryable(error, retryAfterMs(response.headers.get("retry-after")));
      }
      throw error;
    } finally {
      clearTimeout(timer);
      this.aborts.delete(abort);
    }
  }

  /** The next endpoint in turn that is not ejected, or the one that recovers first. */
  private pick(now: number): Endpoint {
    const n = this.endpoints.length;
    for (let i = 0; i < n; i++) {
      const endpoint = this.endpoints[(this.cursor + i) % n]!;
      if (endpoint.ejectedUntil <= now) {
        this.cursor = (this.cursor + i + 1) % n;
        return endpoint;
      }
    }
    return this.endpoints.reduce((a, b) => (b.ejectedUntil < a.ejectedUntil ? b : a));
  }

  /** Runs `attempt` on endpoint after endpoint until it succeeds or fails for good. */
  private async call<R>(attempt: (endpoint: Endpoint) => Promise<R>): Promise<R> {
    let backoff = BACKOFF_MIN_MS;
    let last: IdMintError | null = null;
    for (let i = 0; i < this.attempts; i++) {
      if (this.closed) throw new IdMintError("Closed", "the client is closed");
      const endpoint = this.pick(Date.now());
      try {
        const result = await attempt(endpoint);
        endpoint.failures = 0;
        endpoint.ejectedUntil = 0;
        return result;
      } catch (e) {
        if (!(e instanceof Retryable)) throw e;
        last = e.error;
        const eject = Math.min(EJECT_MIN_MS * 2 ** endpoint.failures, EJECT_MAX_MS);
        endpoint.failures = Math.min(endpoint.failures + 1, 16);
        const retryAfter = e.retryAfterMs === null ? null : Math.min(e.retryAfterMs, this.maxRetryAfterMs);
        endpoint.ejectedUntil = Date.now() + Math.max(eject, retryAfter ?? 0);
        if (i + 1 < this.attempts) {
          // Another endpoint may be ready now: wait the Retry-After only when none is.
          const others = this.endpoints.some((ep) => ep !== endpoint && ep.ejectedUntil <= Date.now());
          const jittered = backoff / 2 + Math.random() * (backoff / 2);
          await sleep(others || retryAfter === null ? jittered : Math.max(jittered, retryAfter));
          backoff = Math.min(backoff * 2, BACKOFF_MAX_MS);
        }
      }
    }
    throw new IdMintError("Unavailable", `no endpoint answered after ${this.attempts} attempts: ${last?.message}`, {
      ...(last?.status === undefined ? {} : { status: last.status }),
      cause: last,
    });
  }
}
