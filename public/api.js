// The bridge's HTTP API as the console uses it: same origin, the session in its HttpOnly cookie.

/** An error answer from the bridge: its status and the bridge's error shape. */
export class ApiError extends Error {
  constructor(status, body) {
    super(body && body.message ? body.message : `HTTP ${status}`);
    this.status = status;
    this.body = body || { error: `http-${status}`, reason: `HTTP ${status}`, details: null };
  }
}

/** Sends a request and returns the parsed JSON body (null for 204); throws ApiError otherwise. */
export async function request(method, path, body) {
  const init = { method, headers: { accept: "application/json" }, credentials: "same-origin" };
  // Every write is JSON, even without a body: the bridge refuses cookie-authenticated writes
  // that are not (a cross-site form cannot send JSON).
  if (method !== "GET" && method !== "HEAD") init.headers["content-type"] = "application/json";
  if (body !== undefined) init.body = JSON.stringify(body);
  let response;
  try {
    response = await fetch(path, init);
  } catch (cause) {
    throw new ApiError(0, { error: "network", reason: `The bridge could not be reached (${cause.message})`, details: null });
  }
  const text = await response.text();
  let parsed = null;
  if (text) {
    try { parsed = JSON.parse(text); } catch { parsed = { error: "bad-response", reason: text.slice(0, 200), details: null }; }
  }
  if (!response.ok) throw new ApiError(response.status, parsed);
  return parsed;
}

/** A query string from the entries whose value is not empty. */
export function query(params) {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "") search.set(key, String(value));
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

/** A document id as the bridge's URLs take it: Meteor's id encoding (ObjectId as hex, `~` for other EJSON). */
export function wireId(id) {
  if (typeof id === "string") {
    if (id === "") return id;
    if (id.startsWith("-") || id.startsWith("~") || id.startsWith("{") || /^[0-9a-f]{24}$/.test(id)) return `-${id}`;
    return id;
  }
  if (id && typeof id === "object" && id.$type === "oid") return id.$value;
  return `~${JSON.stringify(id)}`;
}

/** Parses JSON typed by a person; returns {value} or {error} with a short reason. */
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
    return { error: `${what} is not valid JSON: ${error.message}` };
  }
}
