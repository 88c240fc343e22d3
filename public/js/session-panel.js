// @ts-check
// The header (connection and user) and the session panel: start, log in, sign up, log out, end.

import { request } from "../api.js";
import { element, showMessage } from "./dom.js";
import { connectionLabel, userLabel } from "./format.js";

/** @typedef {import("./app.js").App} App */
/** @typedef {import("./state.js").State} State */
/** @typedef {import("./store.js").Part} Part */

/**
 * Wires the panel's controls; returns its render step.
 * @param {App} app
 * @returns {(state: State, parts: Set<Part>) => void}
 */
export function mountSessionPanel(app) {
  const pill = element("connection", HTMLElement);
  const user = element("user", HTMLElement);
  const anonymous = element("anonymous", HTMLButtonElement);
  const logout = element("logout", HTMLButtonElement);
  const endSession = element("end-session", HTMLButtonElement);
  const loginForm = element("login-form", HTMLFormElement);
  const loginUser = element("login-user", HTMLInputElement);
  const loginPassword = element("login-password", HTMLInputElement);
  const signup = element("signup", HTMLButtonElement);
  const resumeForm = element("resume-form", HTMLFormElement);
  const resumeToken = element("resume-token", HTMLInputElement);
  const message = element("session-message", HTMLElement);

  /** @returns {Record<string, string>} */
  const credentials = () => {
    const name = loginUser.value.trim();
    const password = loginPassword.value;
    return name.includes("@") ? { email: name, password } : { username: name, password };
  };

  anonymous.addEventListener("click", () => app.sessionAction(() => request("POST", "/v1/sessions", {}), "Anonymous session started"));
  logout.addEventListener("click", () => app.sessionAction(() => request("POST", "/v1/session/logout"), "Logged out"));
  endSession.addEventListener("click", () => app.sessionAction(async () => {
    app.closeStreams();
    await request("DELETE", "/v1/session");
  }, "Session ended"));
  loginForm.addEventListener("submit", (event) => {
    event.preventDefault();
    app.sessionAction(() => app.logIn(credentials()), "Logged in");
  });
  signup.addEventListener("click", () => app.sessionAction(() => request("POST", "/v1/users", credentials()), "Signed up and logged in"));
  resumeForm.addEventListener("submit", (event) => {
    event.preventDefault();
    app.sessionAction(() => app.logIn({ resume: resumeToken.value.trim() }), "Logged in with the token");
  });

  /** @type {ReturnType<typeof setInterval> | undefined} */
  let countdown;
  let reconnectingSince = 0;
  /** @type {unknown} the connection state the countdown started from */
  let shownConnection = null;

  /** @param {State} state */
  const renderPill = (state) => {
    const label = connectionLabel(state.session, Date.now(), reconnectingSince);
    pill.dataset.state = label.state;
    pill.textContent = label.text;
  };

  return (state, parts) => {
    if (!parts.has("session")) return;
    clearInterval(countdown);
    const connection = state.session && state.session.connection;
    if (connection !== shownConnection) reconnectingSince = Date.now();
    shownConnection = connection;
    if (connection && connection.state === "reconnecting") countdown = setInterval(() => renderPill(state), 250);
    renderPill(state);
    user.textContent = userLabel(state.session);
    const has = state.session !== null;
    logout.disabled = !(has && state.session && state.session.userId);
    endSession.disabled = !has;
    anonymous.disabled = has;
    showMessage(message, state.sessionMessage);
  };
}
