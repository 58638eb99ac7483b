/**
 * Which namespaces promise increasing IDs, and the checks every batch passes before any of its
 * IDs is handed out. The same rules as idmint-client's `order` module.
 */

/** What `GET /v1/namespaces` says about one namespace. */
export interface NamespaceInfo {
  name: string;
  layout: string;
  fingerprint: string;
  id_bits: number;
  js_safe: boolean;
  default_format: string;
  generator_id: number | null;
  ready: boolean;
  generators: number;
  auth: boolean;
  source: string;
  /** `increasing`, `periodic`, `sharded`, `k-sorted` or `unordered`. */
  order?: string;
  [key: string]: unknown;
}

/** `increasing`: every batch strictly increasing; `distinct`: only no ID twice. */
export type Order = "increasing" | "distinct";

/**
 * The order of a namespace's IDs, as the server says (`order` in `GET /v1/namespaces`, from the
 * layout and the source). Only `increasing` gives batches an order to check; `periodic`,
 * `sharded`, `k-sorted`, `unordered` and anything else (a server that predates the field sends
 * nothing) need only distinct IDs. The same rule as idmint-client's `order_of`.
 */
export function orderOf(info: NamespaceInfo): Order {
  return info.order === "increasing" ? "increasing" : "distinct";
}

/** Compares two decimal strings without leading zeros as numbers: -1, 0 or 1. */
export function compareDecimal(a: string, b: string): number {
  if (a.length !== b.length) return a.length < b.length ? -1 : 1;
  return a < b ? -1 : a > b ? 1 : 0;
}

const DECIMAL = /^(0|[1-9][0-9]{0,38})$/;

/**
 * Forms whose fixed-width, big-endian text sorts as the number does (a hyphenated UUID, a ULID, a
 * TypeID of one prefix), so a batch's order can be checked on the text.
 */
const SORTABLE = new Set(["uuid", "ulid", "typeid"]);

/** Compares two IDs in `format` as numbers: -1, 0 or 1 (decimal by length, the sortable forms as text). */
export function compareIds(a: string, b: string, format = "decimal"): number {
  if (format === "decimal") return compareDecimal(a, b);
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * Checks a batch of decimal IDs: each a plain decimal number, and strictly increasing (or free
 * of repeats). Returns the offending pair, or `null`.
 */
export function checkBatch(ids: readonly string[], order: Order, format = "decimal"): [string, string] | null {
  for (const id of ids) {
    if (typeof id !== "string" || (format === "decimal" ? !DECIMAL.test(id) : id === "")) return [String(id), String(id)];
  }
  if (order === "increasing" && (format === "decimal" || SORTABLE.has(format))) {
    for (let i = 1; i < ids.length; i++) {
      if (compareIds(ids[i - 1]!, ids[i]!, format) >= 0) return [ids[i - 1]!, ids[i]!];
    }
  } else {
    const seen = new Set<string>();
    for (const id of ids) {
      if (seen.has(id)) return [id, id];
      seen.add(id);
    }
  }
  return null;
}
