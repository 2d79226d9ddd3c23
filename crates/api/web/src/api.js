// The API client: every request carries the signed-in identity; the event stream is read with
// fetch (EventSource cannot send headers) and resumes with Last-Event-ID after a drop.

const SESSION_KEY = "agentic.session";

/// The signed-in session: kept for this tab only (sessionStorage), unless the person asked
/// to be remembered on this device, since the token is a credential kept in plain text.
export function loadSession() {
  for (const storage of [sessionStorage, localStorage]) {
    try {
      const saved = JSON.parse(storage.getItem(SESSION_KEY) || "null");
      if (saved && typeof saved.user === "string" && saved.user) return saved;
    } catch {
      // A damaged entry is the same as none.
    }
  }
  return null;
}

export function saveSession(session) {
  sessionStorage.removeItem(SESSION_KEY);
  localStorage.removeItem(SESSION_KEY);
  if (session) (session.remember ? localStorage : sessionStorage).setItem(SESSION_KEY, JSON.stringify(session));
}

let unauthorized = null;

/// Called with the error when the server refuses the session's credentials (401): they
/// changed, or the server now needs a token, and nothing else will work until the person
/// signs in again.
export function onUnauthorized(handler) {
  unauthorized = handler;
}

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

function headers(session, extra) {
  const all = { "X-User-Id": session.user, ...extra };
  if (session.token) all.Authorization = `Bearer ${session.token}`;
  return all;
}

async function failure(response) {
  let code = "http_" + response.status;
  let message = `${response.status} ${response.statusText}`;
  try {
    const body = await response.json();
    if (body && body.error) {
      code = body.error.code || code;
      message = body.error.message || message;
    }
  } catch {
    // Not our JSON error shape: keep the status line.
  }
  return new ApiError(response.status, code, message);
}

/// `options.signingIn`: the request checks credentials being entered, so a 401 is its answer
/// rather than a reason to go back to the sign-in.
export async function request(session, method, path, body, options) {
  const init = { method, headers: headers(session) };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (error) {
    throw new ApiError(0, "network", `the server cannot be reached (${error.message})`);
  }
  if (!response.ok) {
    const error = await failure(response);
    if (response.status === 401 && !options?.signingIn && unauthorized) unauthorized(error);
    throw error;
  }
  if (response.status === 204) return null;
  return response.json();
}

/// A prompt as a test case (YAML text): GET /api/prompts/:id/export?as=test.
export async function exportCase(session, promptId) {
  const response = await fetch(`/api/prompts/${encodeURIComponent(promptId)}/export?as=test`, {
    headers: headers(session),
  });
  if (!response.ok) {
    const error = await failure(response);
    if (response.status === 401 && unauthorized) unauthorized(error);
    throw error;
  }
  return response.text();
}

/// A user's file, as an object URL (for previews and downloads).
export async function fileUrl(session, path) {
  const response = await fetch(`/api/files?path=${encodeURIComponent(path)}`, {
    headers: headers(session),
  });
  if (!response.ok) {
    const error = await failure(response);
    if (response.status === 401 && unauthorized) unauthorized(error);
    throw error;
  }
  return URL.createObjectURL(await response.blob());
}

/// Follows the user's events until `stop()`: `onEvent({id, event, data})` for each, in order;
/// `onState("live" | "reconnecting" | "failed", detail)` as the connection changes. After a drop
/// it reconnects with the id of the last event it saw, so nothing is missed or seen twice.
export function followEvents(session, { lastEventId, onEvent, onState }) {
  let stopped = false;
  let controller = null;
  let last = lastEventId ?? null;
  let delay = 250;

  async function connect() {
    while (!stopped) {
      controller = new AbortController();
      try {
        const extra = last !== null ? { "Last-Event-ID": String(last) } : {};
        const response = await fetch("/api/events/stream", {
          headers: headers(session, extra),
          signal: controller.signal,
        });
        if (!response.ok) {
          const error = await failure(response);
          if (response.status === 401 || response.status === 400) {
            onState("failed", error.message);
            if (response.status === 401 && unauthorized) unauthorized(error);
            return;
          }
          throw error;
        }
        onState("live");
        delay = 250;
        await read(response.body.getReader());
      } catch (error) {
        if (stopped) return;
        onState("reconnecting", error.message);
      }
      if (stopped) return;
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, 5000);
    }
  }

  async function read(reader) {
    const decoder = new TextDecoder();
    let buffer = "";
    let event = { id: null, event: "message", data: [] };
    for (;;) {
      const { value, done } = await reader.read();
      if (done) throw new Error("the event stream ended");
      buffer += decoder.decode(value, { stream: true });
      let newline;
      while ((newline = buffer.search(/\r\n|\r|\n/)) >= 0) {
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + (buffer.startsWith("\r\n", newline) ? 2 : 1));
        if (line === "") {
          if (event.data.length > 0) dispatch(event);
          event = { id: null, event: "message", data: [] };
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let text = colon < 0 ? "" : line.slice(colon + 1);
        if (text.startsWith(" ")) text = text.slice(1);
        if (field === "data") event.data.push(text);
        else if (field === "event") event.event = text;
        else if (field === "id") event.id = text;
      }
    }
  }

  function dispatch(event) {
    if (event.id !== null && event.id !== "") last = event.id;
    let data;
    try {
      data = JSON.parse(event.data.join("\n"));
    } catch {
      return;
    }
    onEvent({ id: event.id, event: event.event, data });
  }

  connect();
  return {
    stop() {
      stopped = true;
      if (controller) controller.abort();
    },
    lastEventId() {
      return last;
    },
  };
}
