// @ts-check
// Small DOM helpers shared by the panels. Each panel looks its elements up once, when it mounts.

/** @typedef {import("./state.js").Message} Message */

/**
 * The element with this id, of the expected type; throws when the page lacks it.
 * @template {HTMLElement} T
 * @param {string} id
 * @param {new () => T} type
 * @returns {T}
 */
export function element(id, type) {
  const found = document.getElementById(id);
  if (!(found instanceof type)) throw new Error(`the page has no ${type.name} #${id}`);
  return found;
}

/**
 * A copy of a `<template>`'s first element.
 * @template {Element} T
 * @param {HTMLTemplateElement} template
 * @param {new () => T} type
 * @returns {T}
 */
export function fromTemplate(template, type) {
  const copy = template.content.firstElementChild?.cloneNode(true);
  if (!(copy instanceof type)) throw new Error(`template #${template.id} does not hold a ${type.name}`);
  return copy;
}

/**
 * The element inside `root` that matches, of the expected type.
 * @template {Element} T
 * @param {ParentNode} root
 * @param {string} selector
 * @param {new () => T} type
 * @returns {T}
 */
export function inside(root, selector, type) {
  const found = root.querySelector(selector);
  if (!(found instanceof type)) throw new Error(`no ${type.name} ${selector}`);
  return found;
}

/**
 * Shows a message, styled as an error or a success.
 * @param {HTMLElement} target
 * @param {Message} message
 */
export function showMessage(target, message) {
  if (target.textContent !== message.text) target.textContent = message.text;
  target.classList.toggle("error", message.kind === "error");
  target.classList.toggle("ok", message.kind === "ok");
}

/**
 * Marks a field valid or not, for assistive technology and the style.
 * @param {HTMLElement} input
 * @param {boolean} invalid
 */
export function markInvalid(input, invalid) {
  input.setAttribute("aria-invalid", invalid ? "true" : "false");
}
