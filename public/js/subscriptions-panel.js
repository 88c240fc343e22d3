// @ts-check
// The subscriptions panel: subscribe with JSON parameters; each subscription pending, ready or
// failed with its reason, and a button to drop it (one listener for the whole list).

import { parseJSON } from "../api.js";
import { element, fromTemplate, inside, markInvalid } from "./dom.js";
import { subscriptionLabel } from "./format.js";

/** @typedef {import("./app.js").App} App */
/** @typedef {import("./state.js").State} State */
/** @typedef {import("./store.js").Part} Part */

/**
 * @param {App} app
 * @returns {(state: State, parts: Set<Part>) => void}
 */
export function mountSubscriptionsPanel(app) {
  const form = element("subscribe-form", HTMLFormElement);
  const name = element("sub-name", HTMLInputElement);
  const params = element("sub-params", HTMLInputElement);
  const list = element("subscriptions", HTMLUListElement);
  const template = element("subscription-item", HTMLTemplateElement);

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const parsed = parseJSON(params.value || "[]", "Parameters", (v) => (Array.isArray(v) ? null : "must be a JSON array"));
    markInvalid(params, Boolean(parsed.error));
    if (parsed.error) {
      app.store.update("session", (s) => { s.sessionMessage = { text: String(parsed.error), kind: "error" }; });
      return;
    }
    app.subscribe(name.value.trim(), parsed.value || []);
  });

  list.addEventListener("click", (event) => {
    const button = event.target instanceof Element ? event.target.closest("button[data-sub]") : null;
    if (button instanceof HTMLButtonElement && button.dataset.sub) app.unsubscribe(button.dataset.sub);
  });

  return (state, parts) => {
    if (!parts.has("subscriptions")) return;
    const items = [];
    for (const sub of state.subscriptions.values()) {
      const item = fromTemplate(template, HTMLLIElement);
      item.dataset.name = sub.name;
      inside(item, ".label", HTMLElement).textContent = subscriptionLabel(sub);
      const badge = inside(item, ".state", HTMLElement);
      badge.dataset.state = sub.state;
      badge.textContent = sub.state;
      const drop = inside(item, "button", HTMLButtonElement);
      drop.dataset.sub = sub.id;
      drop.textContent = sub.state === "error" ? "Dismiss" : "Unsubscribe";
      drop.setAttribute("aria-label", `${drop.textContent} ${sub.name}`);
      const reason = inside(item, ".reason", HTMLElement);
      if (sub.reason) reason.textContent = sub.reason;
      else reason.remove();
      items.push(item);
    }
    list.replaceChildren(...items);
  };
}
