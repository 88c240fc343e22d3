// @ts-check
// The bridge's HTTP API as the console uses it: same origin, the session in its HttpOnly cookie.

/**
 * The bridge's error shape.
 * @typedef {{error: unknown, reason: string, message?: string, details: unknown}} ErrorBody
 */

/** An error answer from the bridge: its status and the bridge's error shape. */
export class ApiError extends Error {
  /**
   * @param {number} status the HTTP status (0: the bridge could not be reached)
   * @param {ErrorBody | null} body
   */
  constructor(status, body) {
    super(body && body.message ? body.message : `HTTP ${status}`);
    this.status = status;
    /** @type {ErrorBody} */
    this.body = body || { error: `http-${status}`, reason: `HTTP ${status}`, details: null };
  }
}

/**
 * Sends a request and returns the parsed JSON body (null for 204); throws ApiError otherwise.
 * @param {string} method
 * @param {string} path
 * @param {unknown} [body] sent as JSON
 * @returns {Promise<any>}
 */
export async function request(method, path, body) {
  /** @type {Record<string, string>} */
  const headers = { accept: "application/json" };
  // Every write is JSON, even without a body: the bridge refuses cookie-authenticated writes
  // that are not (a cross-site form cannot send JSON).
  if (method !== "GET" && method !== "HEAD") headers["content-type"] = "application/json";
  /** @type {RequestInit} */
  const init = { method, headers, credentials: "same-origin" };
  if (body !== undefined) init.body = JSON.stringify(body);
  let response;
  try {
    response = await fetch(path, init);
  } catch (cause) {
    const reason = `The bridge could not be reached (${cause instanceof Error ? cause.message : cause})`;
    throw new ApiError(0, { error: "network", reason, details: null });
  }
  const text = await response.text();
  let parsed = null;
  if (text) {
    try { parsed = JSON.parse(text); } catch { parsed = { error: "bad-response", reason: text.slice(0, 200), details: null }; }
  }
  if (!response.ok) throw new ApiError(response.status, parsed);
  return parsed;
}

/**
 * A query string from the entries whose value is not empty.
 * @param {Record<string, unknown>} params
 */
export function query(params) {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "") search.set(key, String(value));
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

/**
 * A document id as the bridge's URLs take it: Meteor's id encoding (ObjectId as hex, `~` for other EJSON).
 * @param {unknown} id
 * @returns {string}
 */
export function wireId(id) {
  if (typeof id === "string") {
    if (id === "") return id;
    if (id.startsWith("-") || id.startsWith("~") || id.startsWith("{") || /^[0-9a-f]{24}$/.test(id)) return `-${id}`;
    return id;
  }
  if (id && typeof id === "object" && /** @type {{$type?: unknown}} */ (id).$type === "oid") {
    return String(/** @type {{$value: unknown}} */ (id).$value);
  }
  return `~${JSON.stringify(id)}`;
}

/**
 * Parses JSON typed by a person; returns {value} or {error} with a short reason.
 * @param {string} text
 * @param {string} what the name used in the reason
 * @param {(value: any) => string | null} [check] a problem with the value, or null
 * @returns {{value?: any, error?: string}}
 */
export function parseJSON(text, what, check) {
  const trimmed = text.trim();
  if (trimmed === "") return { value: undefined };
  try {
    const value = JSON.parse(trimmed);
    if (check) {
      const problem = check(value);
      if (problem) return { error: `${what}: ${problem}` };
    }
    return { value };
  } catch (error) {
    return { error: `${what} is not valid JSON: ${error instanceof Error ? error.message : error}` };
  }
}
