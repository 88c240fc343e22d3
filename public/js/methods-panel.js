// @ts-check
// The methods panel: call a method with JSON parameters; its result, or its error.

import { parseJSON } from "../api.js";
import { element, markInvalid } from "./dom.js";

/** @typedef {import("./app.js").App} App */
/** @typedef {import("./state.js").State} State */
/** @typedef {import("./store.js").Part} Part */

/**
 * @param {App} app
 * @returns {(state: State, parts: Set<Part>) => void}
 */
export function mountMethodsPanel(app) {
  const form = element("method-form", HTMLFormElement);
  const name = element("method-name", HTMLInputElement);
  const params = element("method-params", HTMLInputElement);
  const output = element("method-output", HTMLElement);

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const parsed = parseJSON(params.value || "[]", "Parameters", (v) => (Array.isArray(v) ? null : "must be a JSON array"));
    markInvalid(params, Boolean(parsed.error));
    if (parsed.error) {
      const text = parsed.error;
      app.store.update("methods", (s) => { s.methodOutput = { text, error: true }; });
      return;
    }
    app.callMethod(name.value.trim(), parsed.value || []);
  });

  return (state, parts) => {
    if (!parts.has("methods")) return;
    output.textContent = state.methodOutput.text;
    output.classList.toggle("error", state.methodOutput.error);
  };
}
