// @ts-check
// One of the bridge's event streams, through the browser's EventSource: it reconnects by itself
// with `Last-Event-ID`; the bridge answers with what was missed, or `reset` and a snapshot.

/** Every event the bridge sends (openapi.yaml, `/v1/events`). */
export const STREAM_EVENTS = ["added", "changed", "removed", "moved", "ready", "nosub", "connection", "user", "reset", "snapshot", "error"];

/**
 * @typedef {object} StreamHandlers
 * @property {(name: string, id: string, data: string) => void} onEvent every named event
 * @property {() => void} [onOpen] connected (first, or again after a drop)
 * @property {() => void} [onReconnecting] the connection dropped; the browser tries again
 * @property {() => void} [onClosed] the bridge refused the stream; nobody tries again
 */

/**
 * Opens a stream; `close()` ends it (no handler runs after that).
 * @param {string} url
 * @param {StreamHandlers} handlers
 * @returns {{close: () => void}}
 */
export function openEventStream(url, handlers) {
  const source = new EventSource(url);
  let open = true;
  for (const name of STREAM_EVENTS) {
    source.addEventListener(name, (event) => {
      if (!open || !(event instanceof MessageEvent)) return;
      if (name === "error" && !event.data) return; // the connection's own error, handled below
      handlers.onEvent(name, event.lastEventId, String(event.data));
    });
  }
  source.onerror = (event) => {
    if (!open || event instanceof MessageEvent) return; // the bridge's `error` event, handled above
    if (source.readyState === EventSource.CLOSED) {
      open = false;
      if (handlers.onClosed) handlers.onClosed();
    } else if (handlers.onReconnecting) {
      handlers.onReconnecting();
    }
  };
  source.onopen = () => {
    if (open && handlers.onOpen) handlers.onOpen();
  };
  return {
    close() {
      open = false;
      source.close();
    },
  };
}
