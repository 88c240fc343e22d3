// @ts-check
// EJSON values as the bridge writes them (JSON with `$date`, `$binary`, `$type`/`$value`,
// `$regexp`/`$flags`, `$InfNaN` and `$escape`), ordered exactly as the bridge orders them when it
// sorts a query: by MongoDB's type class first, then by value (Sources/DDP/Selector/EJSON+Ordering.swift).

/**
 * The EJSON type of a value in its JSON form, as the bridge's parser reads it.
 * @typedef {"null" | "number" | "string" | "object" | "array" | "binary" | "oid" | "custom" | "bool" | "date" | "regexp"} Kind
 */

/** MongoDB's order of type classes: null < numbers < strings < objects < arrays < binary < ObjectId < booleans < dates < regular expressions. */
const TYPE_ORDER = { null: 1, number: 2, string: 3, object: 4, custom: 4, array: 5, binary: 6, oid: 7, bool: 8, date: 9, regexp: 11 };

/** @param {Record<string, unknown>} object @param {string} key */
const has = (object, key) => Object.prototype.hasOwnProperty.call(object, key);

/**
 * The EJSON type of a JSON value: a one-member object `{"$date": n}` is a date, and so on,
 * following the bridge's parser (EJSONParser.convertTyped); other objects stay objects.
 * @param {unknown} value
 * @returns {Kind}
 */
export function kindOf(value) {
  if (value === null || value === undefined) return "null";
  switch (typeof value) {
    case "number": return "number";
    case "string": return "string";
    case "boolean": return "bool";
    default: break;
  }
  if (Array.isArray(value)) return "array";
  const object = /** @type {Record<string, unknown>} */ (value);
  const keys = Object.keys(object);
  if (keys.length === 1) {
    const member = object[keys[0]];
    if (keys[0] === "$date" && typeof member === "number") return "date";
    if (keys[0] === "$binary" && typeof member === "string") return "binary";
    if (keys[0] === "$InfNaN" && typeof member === "number") return "number";
    return "object";
  }
  if (keys.length === 2) {
    if (has(object, "$type") && has(object, "$value")) return object.$type === "oid" ? "oid" : "custom";
    if (has(object, "$regexp") && has(object, "$flags")) return "regexp";
  }
  return "object";
}

/**
 * A number in JSON form as a double (`{"$InfNaN": 1}` is +Infinity).
 * @param {unknown} value
 * @returns {number}
 */
function numberOf(value) {
  if (typeof value === "number") return value;
  const sign = /** @type {{$InfNaN: number}} */ (value).$InfNaN;
  return sign > 0 ? Infinity : sign < 0 ? -Infinity : NaN;
}

/**
 * An EJSON object's members in order: `{"$escape": {...}}` is the object inside it.
 * @param {unknown} value
 * @returns {[string, unknown][]}
 */
export function membersOf(value) {
  const object = /** @type {Record<string, unknown>} */ (value);
  const keys = Object.keys(object);
  if (keys.length === 1 && keys[0] === "$escape" && object.$escape && typeof object.$escape === "object" && !Array.isArray(object.$escape)) {
    return Object.entries(/** @type {Record<string, unknown>} */ (object.$escape));
  }
  return Object.entries(object);
}

const ASCII = /^[\x00-\x7f]*$/;

/**
 * Compares strings as Swift does (the bridge's sort): by the Unicode scalars of their NFC form.
 * @param {string} a
 * @param {string} b
 * @returns {number} -1, 0 or 1
 */
export function compareStrings(a, b) {
  if (a === b) return 0;
  if (ASCII.test(a) && ASCII.test(b)) return a < b ? -1 : 1;
  const x = Array.from(a.normalize("NFC"), (c) => /** @type {number} */ (c.codePointAt(0)));
  const y = Array.from(b.normalize("NFC"), (c) => /** @type {number} */ (c.codePointAt(0)));
  const n = Math.min(x.length, y.length);
  for (let i = 0; i < n; i++) if (x[i] !== y[i]) return x[i] < y[i] ? -1 : 1;
  return x.length === y.length ? 0 : x.length < y.length ? -1 : 1;
}

/** @param {number} x @param {number} y */
const compareNumbers = (x, y) => (x < y ? -1 : x > y ? 1 : 0);

/** @param {string} base64 @returns {Uint8Array} */
function bytesOf(base64) {
  const text = atob(base64);
  const bytes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
  return bytes;
}

/**
 * MongoDB's comparison of two EJSON values (JSON form), as the bridge sorts: by type class,
 * then by value; values of the same class the bridge cannot order compare equal.
 * @param {unknown} a
 * @param {unknown} b
 * @returns {number} -1, 0 or 1
 */
export function compareValues(a, b) {
  const ka = kindOf(a);
  const kb = kindOf(b);
  const ta = TYPE_ORDER[ka];
  const tb = TYPE_ORDER[kb];
  if (ta !== tb) return ta < tb ? -1 : 1;
  if (ka !== kb) return 0; // an object and a custom type: the same class, no order between them
  const x = /** @type {any} */ (a);
  const y = /** @type {any} */ (b);
  switch (ka) {
    case "null": return 0;
    case "number": return compareNumbers(numberOf(x), numberOf(y));
    case "date": return compareNumbers(x.$date, y.$date);
    case "string": return compareStrings(x, y);
    case "bool": return x === y ? 0 : x ? 1 : -1;
    case "array": {
      const n = Math.min(x.length, y.length);
      for (let i = 0; i < n; i++) {
        const c = compareValues(x[i], y[i]);
        if (c !== 0) return c;
      }
      return compareNumbers(x.length, y.length);
    }
    case "object": {
      const u = membersOf(x);
      const v = membersOf(y);
      const n = Math.min(u.length, v.length);
      for (let i = 0; i < n; i++) {
        if (u[i][0] !== v[i][0]) return compareStrings(u[i][0], v[i][0]);
        const c = compareValues(u[i][1], v[i][1]);
        if (c !== 0) return c;
      }
      return compareNumbers(u.length, v.length);
    }
    case "binary": {
      const u = bytesOf(x.$binary);
      const v = bytesOf(y.$binary);
      if (u.length !== v.length) return u.length < v.length ? -1 : 1;
      for (let i = 0; i < u.length; i++) if (u[i] !== v[i]) return u[i] < v[i] ? -1 : 1;
      return 0;
    }
    case "oid":
    case "custom":
      return compareValues(x.$value, y.$value);
    case "regexp": {
      const c = compareStrings(x.$regexp, y.$regexp);
      return c !== 0 ? c : compareStrings(x.$flags, y.$flags);
    }
    default:
      return 0;
  }
}

/**
 * The value at a dotted path as the bridge's sort reads it: through objects only; a missing
 * member, or a step into anything but an object, is null.
 * @param {unknown} document
 * @param {string[]} path
 * @returns {unknown}
 */
export function valueAt(document, path) {
  /** @type {unknown} */
  let current = document;
  for (const key of path) {
    if (kindOf(current) !== "object") return null;
    let members = /** @type {Record<string, unknown>} */ (current);
    const escaped = members.$escape;
    if (escaped && typeof escaped === "object" && !Array.isArray(escaped) && Object.keys(members).length === 1) {
      members = /** @type {Record<string, unknown>} */ (escaped);
    }
    if (!has(members, key)) return null;
    current = members[key];
  }
  return current === undefined ? null : current;
}
