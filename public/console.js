// The ddp-bridge web console: a client of the bridge's public HTTP API and its event stream.
import { ApiError, parseJSON, query, request, wireId } from "./api.js";

const $ = (id) => document.getElementById(id);
const LOG_LIMIT = 500;
const DOCUMENT_EVENTS = ["added", "changed", "removed", "moved"];
const STREAM_EVENTS = [...DOCUMENT_EVENTS, "ready", "nosub", "connection", "user", "reset", "snapshot", "error"];

const state = {
  session: null,            // GET /v1/session, or null without a session
  subscriptions: new Map(), // id → {id, name, params, state, reason}
  collections: [],          // [{name, count}]
  selected: null,           // the collection shown in the table
  page: 0,
  count: 0,
  shown: new Map(),         // _id key → {field: JSON text} of the rows on screen
  flashes: new Map(),       // "_id key field" → until when its change stays highlighted
  editing: null,            // the _id being edited, or null for an insert
  stream: null,
  countdown: null,
  logPaused: false,
  held: [],
};

// ---------------------------------------------------------------- helpers

function show(element, text, kind) {
  element.textContent = text;
  element.classList.toggle("error", kind === "error");
  element.classList.toggle("ok", kind === "ok");
}

function describe(error) {
  if (error instanceof ApiError) {
    const body = error.body;
    return `${error.status} ${body.error}: ${body.reason}`;
  }
  return String(error && error.message ? error.message : error);
}

function keyOf(id) { return JSON.stringify(id); }

function debounce(fn, ms) {
  let timer = null;
  const run = (delay = ms) => {
    clearTimeout(timer);
    timer = setTimeout(fn, delay);
  };
  return run;
}

function formatValue(value) {
  if (value && typeof value === "object" && "$date" in value && Object.keys(value).length === 1) {
    return new Date(value.$date).toISOString();
  }
  return JSON.stringify(value);
}

function markInvalid(input, invalid) {
  input.setAttribute("aria-invalid", invalid ? "true" : "false");
}

// ---------------------------------------------------------------- session

function renderSession() {
  const pill = $("connection");
  const has = state.session !== null;
  const connection = has ? state.session.connection : null;
  clearInterval(state.countdown);
  if (!has) {
    pill.dataset.state = "none";
    pill.textContent = "no session";
  } else if (connection.state === "reconnecting") {
    pill.dataset.state = "reconnecting";
    const until = Date.now() + (connection.retryIn || 0);
    const tick = () => {
      const left = Math.max(0, Math.ceil((until - Date.now()) / 1000));
      pill.textContent = `reconnecting in ${left} s (attempt ${connection.attempt})`;
    };
    tick();
    state.countdown = setInterval(tick, 250);
  } else {
    pill.dataset.state = connection.state;
    pill.textContent = connection.state;
  }
  const user = has && state.session.userId;
  $("user").textContent = user ? `user ${state.session.username || state.session.userId}` : has ? "anonymous" : "not logged in";
  $("logout").disabled = !user;
  $("end-session").disabled = !has;
  $("anonymous").disabled = has;
}

async function loadSession() {
  try {
    state.session = await request("GET", "/v1/session");
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) {
      state.session = null;
    } else {
      show($("session-message"), describe(error), "error");
      return;
    }
  }
  await loadUsername();
  renderSession();
}

async function loadUsername() {
  const userId = state.session && state.session.userId;
  if (!userId) return;
  try {
    const user = await request("GET", `/v1/collections/users/${encodeURIComponent(wireId(userId))}`);
    state.session.username = user.username || (user.emails && user.emails[0] && user.emails[0].address);
  } catch {
    // The user's document may not be published; the id will do.
  }
}

/** After a session starts or its user changes: follow it again from scratch. */
async function reloadAll() {
  await loadSession();
  if (state.session) {
    openStream();
    await Promise.all([loadSubscriptions(), loadCollections()]);
  } else {
    closeStream();
    state.subscriptions.clear();
    state.collections = [];
    state.selected = null;
    renderSubscriptions();
    renderCollections();
    renderDocuments([]);
  }
}

async function sessionAction(action, success) {
  show($("session-message"), "…");
  try {
    await action();
    show($("session-message"), success, "ok");
  } catch (error) {
    show($("session-message"), describe(error), "error");
  }
  await reloadAll();
}

function credentials() {
  const user = $("login-user").value.trim();
  const password = $("login-password").value;
  return user.includes("@") ? { email: user, password } : { username: user, password };
}

async function logIn(body) {
  if (state.session) return request("POST", "/v1/session/login", body);
  return request("POST", "/v1/sessions", body);
}

// ---------------------------------------------------------------- subscriptions

function renderSubscriptions() {
  const list = $("subscriptions");
  list.replaceChildren();
  for (const sub of state.subscriptions.values()) {
    const item = document.createElement("li");
    item.dataset.name = sub.name;
    const label = document.createElement("span");
    label.className = "mono";
    label.textContent = `${sub.name}(${sub.params.map((p) => JSON.stringify(p)).join(", ")})`;
    const badge = document.createElement("span");
    badge.className = "state";
    badge.dataset.state = sub.state;
    badge.textContent = sub.state;
    const drop = document.createElement("button");
    drop.type = "button";
    drop.className = "secondary";
    drop.textContent = sub.state === "error" ? "Dismiss" : "Unsubscribe";
    drop.setAttribute("aria-label", `${drop.textContent} ${sub.name}`);
    drop.addEventListener("click", () => unsubscribe(sub));
    item.append(label, badge, drop);
    if (sub.reason) {
      const reason = document.createElement("span");
      reason.className = "reason";
      reason.textContent = sub.reason;
      item.append(reason);
    }
    list.append(item);
  }
}

async function loadSubscriptions() {
  try {
    const listed = await request("GET", "/v1/subscriptions");
    const failed = [...state.subscriptions.values()].filter((s) => s.state === "error");
    state.subscriptions = new Map(listed.map((s) => [s.id, { ...s, reason: null }]));
    for (const sub of failed) state.subscriptions.set(sub.id, sub);
  } catch (error) {
    if (!(error instanceof ApiError && error.status === 401)) show($("session-message"), describe(error), "error");
  }
  renderSubscriptions();
}

async function unsubscribe(sub) {
  if (sub.state === "error") {
    state.subscriptions.delete(sub.id);
    renderSubscriptions();
    return;
  }
  try {
    await request("DELETE", `/v1/subscriptions/${encodeURIComponent(sub.id)}`);
  } catch (error) {
    show($("session-message"), describe(error), "error");
  }
  await loadSubscriptions();
}

// ---------------------------------------------------------------- collections and documents

function renderCollections() {
  const list = $("collections");
  list.replaceChildren();
  for (const collection of state.collections) {
    const item = document.createElement("li");
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = `${collection.name} (${collection.count})`;
    button.dataset.collection = collection.name;
    button.setAttribute("aria-pressed", String(collection.name === state.selected));
    button.addEventListener("click", () => selectCollection(collection.name));
    item.append(button);
    list.append(item);
  }
}

async function loadCollections() {
  try {
    const listed = await request("GET", "/v1/collections");
    state.collections = Array.isArray(listed) ? listed : listed.collections || [];
  } catch (error) {
    if (!(error instanceof ApiError && error.status === 401)) show($("query-message"), describe(error), "error");
  }
  const first = !state.selected && state.collections.length > 0;
  if (first) state.selected = state.collections[0].name;
  renderCollections();
  if (first || !state.collections.some((c) => c.name === state.selected)) await loadDocuments();
}

function selectCollection(name) {
  state.selected = name;
  state.page = 0;
  state.shown.clear();
  cancelEdit();
  renderCollections();
  loadDocuments();
}

function readQuery() {
  const selector = parseJSON($("q-selector").value, "Selector", (v) => (v && typeof v === "object" && !Array.isArray(v) ? null : "must be a JSON object"));
  const sort = parseJSON($("q-sort").value, "Sort", (v) => (v && typeof v === "object" ? null : "must be an object or an array"));
  markInvalid($("q-selector"), Boolean(selector.error));
  markInvalid($("q-sort"), Boolean(sort.error));
  const limit = Math.min(1000, Math.max(1, Number($("q-limit").value) || 20));
  if (selector.error || sort.error) return { error: selector.error || sort.error };
  return {
    selector: selector.value === undefined ? "" : JSON.stringify(selector.value),
    sort: sort.value === undefined ? "" : JSON.stringify(sort.value),
    limit,
  };
}

async function loadDocuments() {
  if (!state.selected || !state.session) {
    renderDocuments([]);
    return;
  }
  const q = readQuery();
  if (q.error) {
    show($("query-message"), q.error, "error");
    return;
  }
  try {
    const path = `/v1/collections/${encodeURIComponent(state.selected)}` +
      query({ selector: q.selector, sort: q.sort, skip: state.page * q.limit, limit: q.limit });
    const answer = await request("GET", path);
    state.count = answer.count;
    show($("query-message"), "");
    renderDocuments(answer.documents, q.limit);
  } catch (error) {
    show($("query-message"), describe(error), "error");
  }
}

function renderDocuments(documents, limit = 20) {
  const body = $("documents").tBodies[0];
  const previous = state.shown;
  const firstRender = previous.size === 0;
  const next = new Map();
  body.replaceChildren();
  for (const doc of documents) {
    const key = keyOf(doc._id);
    const before = previous.get(key);
    const fields = {};
    const row = document.createElement("tr");
    row.dataset.id = key;
    if (!before && !firstRender) row.classList.add("added");
    const idCell = document.createElement("td");
    idCell.textContent = typeof doc._id === "string" ? doc._id : JSON.stringify(doc._id);
    const fieldCell = document.createElement("td");
    fieldCell.className = "fields";
    for (const [name, value] of Object.entries(doc)) {
      if (name === "_id") continue;
      const text = JSON.stringify(value);
      fields[name] = text;
      const span = document.createElement("span");
      span.className = "field";
      span.dataset.field = name;
      const flashKey = `${key} ${name}`;
      if (before && before[name] !== text) state.flashes.set(flashKey, Date.now() + 1600);
      if ((state.flashes.get(flashKey) || 0) > Date.now()) span.classList.add("flash");
      const keySpan = document.createElement("span");
      keySpan.className = "key";
      keySpan.textContent = `${name}: `;
      span.append(keySpan, formatValue(value));
      fieldCell.append(span);
    }
    const actions = document.createElement("td");
    actions.className = "actions";
    const edit = document.createElement("button");
    edit.type = "button";
    edit.className = "secondary";
    edit.textContent = "Edit";
    edit.setAttribute("aria-label", `Edit ${idCell.textContent}`);
    edit.addEventListener("click", () => startEdit(doc));
    const remove = document.createElement("button");
    remove.type = "button";
    remove.className = "secondary";
    remove.textContent = "Remove";
    remove.setAttribute("aria-label", `Remove ${idCell.textContent}`);
    remove.addEventListener("click", () => removeDocument(doc._id));
    actions.append(edit, remove);
    row.append(idCell, fieldCell, actions);
    body.append(row);
    next.set(key, fields);
  }
  state.shown = next;
  for (const [flashKey, until] of state.flashes) if (until <= Date.now()) state.flashes.delete(flashKey);
  const pages = Math.max(1, Math.ceil(state.count / limit));
  $("documents-caption").textContent = state.selected
    ? `${state.selected}: ${state.count} matching document${state.count === 1 ? "" : "s"}`
    : "Select a collection";
  $("page-info").textContent = state.selected ? `page ${state.page + 1} of ${pages}` : "";
  $("prev-page").disabled = state.page === 0;
  $("next-page").disabled = state.page + 1 >= pages;
}

const refreshDocuments = debounce(() => loadDocuments(), 120);
const refreshCollections = debounce(() => loadCollections(), 150);

/** A removed document fades out before the table is reloaded without it. */
function fadeOut(id) {
  const row = $("documents").querySelector(`tr[data-id="${CSS.escape(keyOf(id))}"]`);
  if (!row) return false;
  row.classList.add("removed");
  return true;
}

// ---------------------------------------------------------------- writes

function startEdit(doc) {
  const { _id, ...fields } = doc;
  state.editing = _id;
  $("editor").value = JSON.stringify(fields, null, 2);
  $("editor-label").textContent = `Edit ${typeof _id === "string" ? _id : JSON.stringify(_id)} (fields to set, or a modifier)`;
  $("save").textContent = "Save";
  $("cancel-edit").hidden = false;
  show($("editor-message"), "");
  $("editor").focus();
}

function cancelEdit() {
  state.editing = null;
  $("editor-label").textContent = "New document (JSON)";
  $("save").textContent = "Insert";
  $("cancel-edit").hidden = true;
}

async function saveDocument(event) {
  event.preventDefault();
  const parsed = parseJSON($("editor").value, "The document", (v) => (v && typeof v === "object" && !Array.isArray(v) ? null : "must be a JSON object"));
  markInvalid($("editor"), Boolean(parsed.error));
  if (parsed.error || parsed.value === undefined) {
    show($("editor-message"), parsed.error || "Type a JSON object", "error");
    return;
  }
  if (!state.selected) {
    show($("editor-message"), "Select a collection first", "error");
    return;
  }
  const base = `/v1/collections/${encodeURIComponent(state.selected)}`;
  try {
    if (state.editing === null) {
      const answer = await request("POST", base, parsed.value);
      show($("editor-message"), `Inserted ${answer && answer._id !== undefined ? JSON.stringify(answer._id) : ""}`, "ok");
    } else {
      await request("PATCH", `${base}/${encodeURIComponent(wireId(state.editing))}`, parsed.value);
      show($("editor-message"), "Saved", "ok");
      cancelEdit();
    }
  } catch (error) {
    show($("editor-message"), describe(error), "error");
  }
}

async function removeDocument(id) {
  try {
    await request("DELETE", `/v1/collections/${encodeURIComponent(state.selected)}/${encodeURIComponent(wireId(id))}`);
  } catch (error) {
    show($("editor-message"), describe(error), "error");
  }
}

// ---------------------------------------------------------------- methods

async function callMethod(event) {
  event.preventDefault();
  const output = $("method-output");
  const name = $("method-name").value.trim();
  const params = parseJSON($("method-params").value || "[]", "Parameters", (v) => (Array.isArray(v) ? null : "must be a JSON array"));
  markInvalid($("method-params"), Boolean(params.error));
  if (params.error) {
    output.classList.add("error");
    output.textContent = params.error;
    return;
  }
  output.classList.remove("error");
  output.textContent = `calling ${name}…`;
  try {
    const answer = await request("POST", `/v1/methods/${encodeURIComponent(name)}`, params.value || []);
    output.textContent = `result:\n${JSON.stringify(answer.result, null, 2)}`;
  } catch (error) {
    output.classList.add("error");
    const body = error instanceof ApiError ? error.body : { error: "client", reason: describe(error) };
    output.textContent = `status: ${error.status || "-"}\nerror: ${JSON.stringify(body.error)}\nreason: ${body.reason}\n` +
      (body.details !== undefined && body.details !== null ? `details: ${JSON.stringify(body.details, null, 2)}` : "");
  }
}

// ---------------------------------------------------------------- the event stream

function logEvent(name, id, data) {
  const item = document.createElement("li");
  const idSpan = document.createElement("span");
  idSpan.className = "event-id";
  idSpan.textContent = id ? `#${id}` : "–";
  const nameSpan = document.createElement("span");
  nameSpan.className = "event-name";
  nameSpan.textContent = name;
  item.dataset.event = name;
  item.append(idSpan, nameSpan, data.length > 400 ? `${data.slice(0, 400)}…` : data);
  if (state.logPaused) {
    state.held.push(item);
    if (state.held.length > LOG_LIMIT) state.held.shift();
  } else {
    const log = $("event-log");
    log.prepend(item);
    while (log.childElementCount > LOG_LIMIT) log.lastElementChild.remove();
  }
  $("log-info").textContent = state.logPaused ? `paused, ${state.held.length} held` : "";
}

function closeStream() {
  if (state.stream) state.stream.close();
  state.stream = null;
}

/** Follows the session's events. The browser reconnects by itself, sending `Last-Event-ID`;
 * when the bridge cannot resume it sends `reset`, and the page reloads everything it shows. */
function openStream() {
  if (state.stream && state.stream.readyState !== EventSource.CLOSED) return;
  const stream = new EventSource("/v1/events?snapshot=true");
  state.stream = stream;
  for (const name of STREAM_EVENTS) {
    stream.addEventListener(name, (event) => {
      if (name === "error" && !event.data) return; // the connection's own error, handled below
      handleEvent(name, event.lastEventId, event.data);
    });
  }
  stream.onerror = (event) => {
    if (event instanceof MessageEvent) return; // the bridge's own `error` event, handled above
    if (stream.readyState === EventSource.CLOSED) {
      // The bridge refused the stream (no session any more): show that.
      state.stream = null;
      loadSession();
    } else if (state.session) {
      state.session.connection = { state: "connecting" };
      $("connection").dataset.state = "connecting";
      $("connection").textContent = "stream reconnecting…";
    }
  };
  stream.onopen = () => {
    if (state.session) loadSession();
  };
}

function handleEvent(name, id, text) {
  logEvent(name, id, text);
  let data = null;
  try { data = JSON.parse(text); } catch { data = null; }
  if (DOCUMENT_EVENTS.includes(name) && data) {
    refreshCollections();
    if (data.collection === state.selected) {
      if (name === "removed" && fadeOut(data.id)) refreshDocuments(650);
      else refreshDocuments();
    }
    return;
  }
  switch (name) {
    case "connection":
      if (state.session && data) {
        state.session.connection = data;
        renderSession();
      }
      break;
    case "user":
      if (state.session && data) {
        state.session.userId = data.userId;
        state.session.username = null;
        loadUsername().then(renderSession);
        refreshCollections();
      }
      break;
    case "ready":
      for (const subId of (data && data.subscriptions) || []) {
        const sub = state.subscriptions.get(subId);
        if (sub) sub.state = "ready";
      }
      renderSubscriptions();
      loadSubscriptions();
      break;
    case "nosub":
      if (data && data.error) {
        const sub = state.subscriptions.get(data.subscription) || { id: data.subscription, name: "?", params: [] };
        sub.state = "error";
        sub.reason = `${data.error.error}: ${data.error.reason || data.error.message || ""}`;
        state.subscriptions.set(sub.id, sub);
        renderSubscriptions();
      } else {
        loadSubscriptions();
      }
      break;
    case "reset":
      // The bridge could not resume this stream: everything shown is reloaded.
      state.shown.clear();
      refreshCollections();
      refreshDocuments();
      loadSubscriptions();
      break;
    case "error":
      if (data) show($("session-message"), `stream: ${data.error}: ${data.reason}`, "error");
      if (data && data.error === "session-ended") {
        closeStream();
        reloadAll();
      }
      break;
    default:
      break;
  }
}

// ---------------------------------------------------------------- wiring

function wire() {
  $("anonymous").addEventListener("click", () => sessionAction(() => request("POST", "/v1/sessions", {}), "Anonymous session started"));
  $("logout").addEventListener("click", () => sessionAction(() => request("POST", "/v1/session/logout"), "Logged out"));
  $("end-session").addEventListener("click", () => sessionAction(async () => {
    closeStream();
    await request("DELETE", "/v1/session");
  }, "Session ended"));
  $("login-form").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionAction(() => logIn(credentials()), "Logged in");
  });
  $("signup").addEventListener("click", () => sessionAction(() => request("POST", "/v1/users", credentials()), "Signed up and logged in"));
  $("resume-form").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionAction(() => logIn({ resume: $("resume-token").value.trim() }), "Logged in with the token");
  });
  $("subscribe-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const name = $("sub-name").value.trim();
    const params = parseJSON($("sub-params").value || "[]", "Parameters", (v) => (Array.isArray(v) ? null : "must be a JSON array"));
    markInvalid($("sub-params"), Boolean(params.error));
    if (params.error) {
      show($("session-message"), params.error, "error");
      return;
    }
    try {
      const sub = await request("POST", "/v1/subscriptions", { name, params: params.value || [], wait: false });
      const known = state.subscriptions.get(sub.id);
      if (known && known.state === "error") {
        // Its `nosub` arrived before this answer: keep the error, name the subscription.
        known.name = sub.name;
        known.params = sub.params;
      } else if (!known) {
        state.subscriptions.set(sub.id, { ...sub, reason: null });
      }
      renderSubscriptions();
      await loadSubscriptions();
    } catch (error) {
      const failed = `failed-${Date.now()}`;
      state.subscriptions.set(failed, { id: failed, name, params: params.value || [], state: "error", reason: describe(error) });
      renderSubscriptions();
    }
  });
  $("query-form").addEventListener("submit", (event) => {
    event.preventDefault();
    state.page = 0;
    loadDocuments();
  });
  $("prev-page").addEventListener("click", () => { state.page = Math.max(0, state.page - 1); loadDocuments(); });
  $("next-page").addEventListener("click", () => { state.page += 1; loadDocuments(); });
  $("editor-form").addEventListener("submit", saveDocument);
  $("editor").addEventListener("input", () => {
    const parsed = parseJSON($("editor").value, "The document");
    markInvalid($("editor"), Boolean(parsed.error));
    show($("editor-message"), parsed.error || "", parsed.error ? "error" : undefined);
  });
  $("cancel-edit").addEventListener("click", cancelEdit);
  $("method-form").addEventListener("submit", callMethod);
  $("pause-log").addEventListener("click", () => {
    state.logPaused = !state.logPaused;
    $("pause-log").setAttribute("aria-pressed", String(state.logPaused));
    $("pause-log").textContent = state.logPaused ? "Resume" : "Pause";
    if (!state.logPaused) {
      const log = $("event-log");
      for (const item of state.held) log.prepend(item);
      state.held = [];
      while (log.childElementCount > LOG_LIMIT) log.lastElementChild.remove();
    }
    $("log-info").textContent = state.logPaused ? "paused, 0 held" : "";
  });
  $("clear-log").addEventListener("click", () => { $("event-log").replaceChildren(); state.held = []; });
}

wire();
reloadAll();
