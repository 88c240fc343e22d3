// @ts-check
// EJSON values as the bridge writes them (JSON with `$date`, `$binary`, `$type`/`$value`,
// `$regexp`/`$flags`, `$InfNaN` and `$escape`), compared exactly as the bridge compares them when
// it sorts a query, which is what Meteor's Minimongo does (`LocalCollection._f._cmp`;
// Sources/DDP/Query/EJSON+Ordering.swift): a missing value first, then by type class, then by
// value; and the values a dotted sort path reaches in a document, found as Minimongo's lookup
// finds them (Sources/DDP/Query/FieldPath.swift).

/**
 * The EJSON type of a value in its JSON form, as the bridge's parser reads it.
 * @typedef {"null" | "number" | "string" | "object" | "array" | "binary" | "oid" | "custom" | "bool" | "date" | "regexp"} Kind
 */

/**
 * Minimongo's order of type classes: null < numbers < strings < objects < arrays < binary <
 * ObjectId < booleans < dates < regular expressions (a custom type is an object to it).
 */
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
export function numberOf(value) {
  if (typeof value === "number") return value;
  const sign = /** @type {{$InfNaN: number}} */ (value).$InfNaN;
  return sign > 0 ? Infinity : sign < 0 ? -Infinity : NaN;
}

/**
 * The members of an object (kind "object") in their JSON form: `{"$escape": {...}}` stands for
 * the object inside it.
 * @param {unknown} value
 * @returns {Record<string, unknown>}
 */
function objectOf(value) {
  const object = /** @type {Record<string, unknown>} */ (value);
  const escaped = object.$escape;
  if (escaped && typeof escaped === "object" && !Array.isArray(escaped) && Object.keys(object).length === 1) {
    return /** @type {Record<string, unknown>} */ (escaped);
  }
  return object;
}

/**
 * An EJSON object's members in order: `{"$escape": {...}}` is the object inside it.
 * @param {unknown} value
 * @returns {[string, unknown][]}
 */
export function membersOf(value) {
  return Object.entries(objectOf(value));
}

/**
 * The fields Minimongo compares an object by, in order: a custom type's are `$type` then `$value`.
 * @param {unknown} value an object or a custom type
 * @returns {[string, unknown][]}
 */
function comparableFields(value) {
  if (kindOf(value) === "custom") {
    const custom = /** @type {{$type: unknown, $value: unknown}} */ (value);
    return [["$type", custom.$type], ["$value", custom.$value]];
  }
  return membersOf(value);
}

const ASCII = /^[\x00-\x7f]*$/;

/**
 * A member of an object (kind "object") by name, as the bridge finds it: Swift's `==` on the
 * names, so a name written in another canonically equivalent form ("e\u0301" for "\u00e9") finds
 * it too; `undefined` when there is none.
 * @param {unknown} value
 * @param {string} key
 * @returns {unknown}
 */
export function memberOf(value, key) {
  const members = objectOf(value);
  if (has(members, key)) return members[key];
  const asciiKey = ASCII.test(key);
  const wanted = asciiKey ? key : key.normalize("NFC");
  for (const name of Object.keys(members)) {
    if (asciiKey && ASCII.test(name)) continue;
    if (name.normalize("NFC") === wanted) return members[name];
  }
  return undefined;
}

/**
 * Compares strings as Swift's String does: by the Unicode scalars of their NFC form. It is the
 * order of the bridge's collection list (`GET /v1/collections`), not of a query's values
 * (those compare by UTF-16 code units: `compareCodeUnits`).
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

/**
 * Compares strings as JavaScript's `<` does, and so Minimongo and the bridge's queries: by
 * UTF-16 code units (a character past U+FFFF comes before U+E000…U+FFFF; canonically
 * equivalent strings differ).
 * @param {string} a
 * @param {string} b
 * @returns {number} -1, 0 or 1
 */
export const compareCodeUnits = (a, b) => (a < b ? -1 : a > b ? 1 : 0);

/**
 * The order of a difference, as Minimongo reads a subtraction: NaN (`Infinity - Infinity`) is
 * unordered.
 * @param {number} difference
 * @returns {number} -1, 0, 1 or NaN
 */
const orderOf = (difference) => (difference < 0 ? -1 : difference > 0 ? 1 : difference === 0 ? 0 : NaN);

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
 * An ObjectId's hex, lowercased, as it compares.
 * @param {{$value: unknown}} oid
 */
const hexOf = (oid) => (typeof oid.$value === "string" ? oid.$value.toLowerCase() : "");

/** Two values Minimongo refuses to order (two regular expressions): a sort by them fails. */
export class NoOrderError extends Error {
  constructor() {
    super("regular expressions have no order");
    this.name = "NoOrderError";
  }
}

/**
 * Minimongo's comparison of two EJSON values in JSON form (`LocalCollection._f._cmp`, the
 * bridge's `EJSON.minimongoCompare`), `undefined` standing for a missing value (before
 * everything, null included): by type class, then by value. Numbers by subtraction, so
 * `Infinity` against `Infinity` (and NaN against anything) is unordered; strings by UTF-16 code
 * units; objects (and custom types, as `{$type, $value}`) as their `[key, value, key, value, …]`
 * lists, so key order counts; arrays element by element, then by length; binaries by length
 * first, then byte by byte; ObjectIds by their lowercased hex; dates by time.
 * @param {unknown} a
 * @param {unknown} b
 * @returns {number} -1, 0 or 1; NaN when the two are unordered
 * @throws {NoOrderError} for two regular expressions
 */
export function compareValues(a, b) {
  if (a === undefined) return b === undefined ? 0 : -1;
  if (b === undefined) return 1;
  const ka = kindOf(a);
  const kb = kindOf(b);
  const ta = TYPE_ORDER[ka];
  const tb = TYPE_ORDER[kb];
  if (ta !== tb) return ta < tb ? -1 : 1;
  const x = /** @type {any} */ (a);
  const y = /** @type {any} */ (b);
  switch (ka) {
    case "null": return 0;
    case "number": return orderOf(numberOf(x) - numberOf(y));
    case "date": return orderOf((Number.isNaN(x.$date) ? 0 : x.$date) - (Number.isNaN(y.$date) ? 0 : y.$date));
    case "string": return compareCodeUnits(x, y);
    case "oid": return compareCodeUnits(hexOf(x), hexOf(y));
    case "bool": return x === y ? 0 : x ? 1 : -1;
    case "regexp": throw new NoOrderError();
    case "array": {
      const n = Math.min(x.length, y.length);
      for (let i = 0; i < n; i++) {
        const c = compareValues(x[i], y[i]);
        if (c !== 0) return c;
      }
      return compareNumbers(x.length, y.length);
    }
    case "binary": {
      const u = bytesOf(x.$binary);
      const v = bytesOf(y.$binary);
      if (u.length !== v.length) return u.length < v.length ? -1 : 1;
      for (let i = 0; i < u.length; i++) if (u[i] !== v[i]) return u[i] < v[i] ? -1 : 1;
      return 0;
    }
    default: {
      // Objects and custom types: key, value, key, value…
      const u = comparableFields(x);
      const v = comparableFields(y);
      const n = Math.min(u.length, v.length);
      for (let i = 0; i < n; i++) {
        const keys = compareCodeUnits(u[i][0], v[i][0]);
        if (keys !== 0) return keys;
        const values = compareValues(u[i][1], v[i][1]);
        if (values !== 0) return values;
      }
      return compareNumbers(u.length, v.length);
    }
  }
}

/**
 * One value a sort path reaches (FieldPath.Branch): `undefined` when missing; `dontIterate` when
 * it is an array found by an explicit index (`a.0` reaching `[1, 2]` sorts by that array, not by
 * its elements); `indices`, the array positions taken on the way (an explicit index followed by
 * -1), null when none.
 * @typedef {{value: unknown, dontIterate: boolean, indices: number[] | null}} Branch
 */

const DIGITS = /^[0-9]+$/;

/**
 * Minimongo's plain object: an object, or a custom type (not an ObjectId).
 * @param {unknown} value
 */
const isPlainObject = (value) => {
  const kind = kindOf(value);
  return kind === "object" || kind === "custom";
};

/**
 * What a path can look into: an array or a plain object.
 * @param {unknown} value
 */
const isIndexable = (value) => Array.isArray(value) || isPlainObject(value);

/**
 * The values a sort path reaches in a document, with their array positions, as the bridge's
 * `FieldPath.sortBranches` (Minimongo's `makeLookupFunction(key, {forSort: true})`): through
 * objects by key; into an array only by a numeric part (and then only that element: after an
 * array a numeric part is an index, not a key looked up in each element); across an array by
 * looking the rest of the path up in each element that is a plain object.
 * @param {unknown} document
 * @param {string[]} parts the path's parts (between its dots, empty ones included)
 * @returns {Branch[]}
 */
export function sortBranches(document, parts) {
  /** @type {Branch[]} */
  const out = [];
  collect(document, parts, 0, [], out);
  return out;
}

/**
 * Minimongo's lookup of `parts[i…]` in `doc` (an object or an array).
 * @param {unknown} doc
 * @param {string[]} parts
 * @param {number} i
 * @param {number[]} indices the positions taken so far
 * @param {Branch[]} out
 */
function collect(doc, parts, i, indices, out) {
  const part = parts[i];
  /** @type {unknown} */
  let firstLevel;
  let docIsArray = false;
  if (Array.isArray(doc)) {
    // Only a numeric part reaches into an array, and only within it; else no value at all.
    if (!DIGITS.test(part)) return;
    const index = Number(part);
    if (!(index < doc.length)) return;
    // "07" is numeric but no index JavaScript finds an element at.
    firstLevel = part === "0" || part[0] !== "0" ? doc[index] : undefined;
    docIsArray = true;
    indices = [...indices, index, -1];
  } else if (kindOf(doc) === "object") {
    firstLevel = memberOf(doc, part);
  }
  const tracked = indices.length > 0 ? indices : null;
  if (i === parts.length - 1) {
    out.push({ value: firstLevel, dontIterate: docIsArray && Array.isArray(firstLevel), indices: tracked });
    return;
  }
  if (firstLevel === undefined || !isIndexable(firstLevel)) {
    // Nothing deeper: a missing value, except after an explicit index.
    if (!docIsArray) out.push({ value: undefined, dontIterate: false, indices: tracked });
    return;
  }
  collect(firstLevel, parts, i + 1, indices, out);
  // Across an array: the rest of the path in each element that is a plain object, unless the
  // next part is numeric (for a sort, that index only).
  if (Array.isArray(firstLevel) && !DIGITS.test(parts[i + 1])) {
    firstLevel.forEach((element, position) => {
      if (isPlainObject(element)) collect(element, parts, i + 1, [...indices, position], out);
    });
  }
}
