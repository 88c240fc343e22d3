// @ts-check
// The document editor below the table: insert a new document, or edit one (fields to set, or a
// modifier); the JSON is checked as it is typed.

import { parseJSON } from "../api.js";
import { element, markInvalid, showMessage } from "./dom.js";
import { displayId } from "./format.js";

/** @typedef {import("./app.js").App} App */
/** @typedef {import("./state.js").State} State */
/** @typedef {import("./store.js").Part} Part */

/** @param {unknown} v */
const isObject = (v) => (v && typeof v === "object" && !Array.isArray(v) ? null : "must be a JSON object");

/**
 * @param {App} app
 * @returns {(state: State, parts: Set<Part>) => void}
 */
export function mountEditorPanel(app) {
  const form = element("editor-form", HTMLFormElement);
  const editor = element("editor", HTMLTextAreaElement);
  const label = element("editor-label", HTMLLabelElement);
  const message = element("editor-message", HTMLElement);
  const save = element("save", HTMLButtonElement);
  const cancel = element("cancel-edit", HTMLButtonElement);

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const parsed = parseJSON(editor.value, "The document", isObject);
    markInvalid(editor, Boolean(parsed.error));
    if (parsed.error || parsed.value === undefined) {
      app.store.update("editor", (s) => { s.editorMessage = { text: parsed.error || "Type a JSON object", kind: "error" }; });
      return;
    }
    app.saveDocument(parsed.value);
  });
  editor.addEventListener("input", () => {
    const parsed = parseJSON(editor.value, "The document");
    markInvalid(editor, Boolean(parsed.error));
    app.store.update("editor", (s) => { s.editorMessage = parsed.error ? { text: parsed.error, kind: "error" } : { text: "" }; });
  });
  cancel.addEventListener("click", () => app.cancelEdit());

  /** @type {State["editing"]} the edit the form was last filled for */
  let shownEdit = null;

  return (state, parts) => {
    if (!parts.has("editor")) return;
    const edit = state.editing;
    if (edit !== shownEdit) {
      shownEdit = edit;
      if (edit) {
        const { _id, ...fields } = edit.doc;
        editor.value = JSON.stringify(fields, null, 2);
        label.textContent = `Edit ${displayId(edit.id)} (fields to set, or a modifier)`;
        save.textContent = "Save";
        cancel.hidden = false;
        editor.focus();
      } else {
        label.textContent = "New document (JSON)";
        save.textContent = "Insert";
        cancel.hidden = true;
      }
    }
    showMessage(message, state.editorMessage);
  };
}
