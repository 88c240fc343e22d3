// @ts-check
// The ddp-bridge web console: a client of the bridge's public HTTP API and its event streams.
// One store holds the state; the panels (js/*-panel.js) render the parts of it that changed,
// once per animation frame; js/app.js does the requests and follows the streams.

import { createApp } from "./js/app.js";
import { mountDataPanel } from "./js/data-panel.js";
import { mountEditorPanel } from "./js/editor-panel.js";
import { mountLogPanel } from "./js/log-panel.js";
import { mountMethodsPanel } from "./js/methods-panel.js";
import { mountSessionPanel } from "./js/session-panel.js";
import { mountSubscriptionsPanel } from "./js/subscriptions-panel.js";
import { initialState } from "./js/state.js";
import { createStore } from "./js/store.js";

const store = createStore(initialState(), (render) => requestAnimationFrame(render));
const app = createApp(store);
for (const mount of [mountSessionPanel, mountSubscriptionsPanel, mountDataPanel, mountEditorPanel, mountMethodsPanel, mountLogPanel]) {
  store.subscribe(mount(app));
}
store.update(["session", "subscriptions", "collections", "view", "editor", "methods", "log"]);
app.reloadAll();
