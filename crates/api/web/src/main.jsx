// The playground: sign in, conversations, a live timeline, approvals and tools.

import { render } from "preact";
import { memo } from "preact/compat";
import { useCallback, useEffect, useLayoutEffect, useMemo, useRef, useState } from "preact/hooks";

import { ApiError, exportCase, fileUrl, followEvents, loadSession, onUnauthorized, request, saveSession } from "./api.js";
import { highlightLines, markdown, prettyJson } from "./render.js";
import {
  applyEvent,
  callLine,
  callState,
  continued,
  duration,
  errorLine,
  formatMs,
  fromStored,
  groupOutputs,
  isFinished,
  newPrompt,
  promptTime,
  waitingCall,
} from "./timeline.js";

// What the browser tests read: how long each change of the timeline took to draw.
const stats = (window.agenticStats = {
  commits: [],
  firstPaint: null,
  errors: [],
  streamed: { text: 0, tool: 0 },
  exported: null,
});

// ----- routing: #/, #/c/<id>, #/tools, #/tools/<id> -----

function parseRoute() {
  const hash = location.hash.replace(/^#/, "") || "/";
  const parts = hash.split("/").filter(Boolean).map(decodeURIComponent);
  if (parts[0] === "c" && parts[1]) return { view: "conversation", id: parts[1] };
  if (parts[0] === "tools") return { view: "tools", id: parts[1] || null };
  return { view: "conversation", id: null };
}

function useRoute() {
  const [route, setRoute] = useState(parseRoute);
  useEffect(() => {
    const changed = () => setRoute(parseRoute());
    addEventListener("hashchange", changed);
    return () => removeEventListener("hashchange", changed);
  }, []);
  return route;
}

function go(path) {
  location.hash = "#" + path;
}

// ----- theme -----

function useTheme() {
  const [theme, setTheme] = useState(() => localStorage.getItem("agentic.theme") || "auto");
  useEffect(() => {
    const system = matchMedia("(prefers-color-scheme: dark)");
    const apply = () => {
      const dark = theme === "dark" || (theme === "auto" && system.matches);
      document.documentElement.dataset.theme = dark ? "dark" : "light";
    };
    apply();
    localStorage.setItem("agentic.theme", theme);
    // "auto" follows the system as it changes, not only as it was when the page loaded.
    if (theme !== "auto") return undefined;
    system.addEventListener("change", apply);
    return () => system.removeEventListener("change", apply);
  }, [theme]);
  const next = () => setTheme((current) => (current === "auto" ? "dark" : current === "dark" ? "light" : "auto"));
  return [theme, next];
}

// ----- events: one stream for the signed-in user, shared by every view -----

function createBus() {
  const listeners = new Set();
  return {
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    emit(event) {
      for (const listener of listeners) listener(event);
    },
  };
}

// ----- the app -----

function App() {
  const [session, setSession] = useState(loadSession);
  const [notice, setNotice] = useState(null);
  const [lastUser, setLastUser] = useState(() => loadSession()?.user || "");
  const [theme, nextTheme] = useTheme();
  const signOut = () => {
    saveSession(null);
    setSession(null);
  };
  useEffect(() => {
    onUnauthorized((error) => {
      setSession((current) => {
        if (current) setLastUser(current.user);
        return null;
      });
      saveSession(null);
      setNotice(`The server refused the saved sign-in, so sign in again: ${error.message}`);
    });
    return () => onUnauthorized(null);
  }, []);
  if (!session) {
    return (
      <SignIn
        key={notice}
        user={lastUser}
        message={notice}
        onSignedIn={(signed) => {
          saveSession(signed);
          setNotice(null);
          setSession(signed);
        }}
      />
    );
  }
  return <Shell session={session} onSignOut={signOut} theme={theme} nextTheme={nextTheme} />;
}

function SignIn({ onSignedIn, message, user: lastUser }) {
  const [user, setUser] = useState(lastUser || "");
  const [token, setToken] = useState("");
  const [remember, setRemember] = useState(false);
  const [error, setError] = useState(message || null);
  const [busy, setBusy] = useState(false);
  const submit = async (event) => {
    event.preventDefault();
    const session = { user: user.trim(), token: token.trim(), remember };
    if (!session.user) {
      setError("Enter a user id.");
      return;
    }
    setBusy(true);
    try {
      await request(session, "GET", "/api/capabilities", undefined, { signingIn: true });
      onSignedIn(session);
    } catch (failure) {
      if (failure.status === 401 && !session.token) {
        setError(`This server needs a token: set the one it was started with (AGENTIC_API_TOKEN). ${failure.message}`);
      } else if (failure.status === 401) {
        setError(`The server refused these credentials: ${failure.message}`);
      } else {
        setError(failure.message);
      }
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="signin">
      <form onSubmit={submit} aria-labelledby="signin-title">
        <h1 id="signin-title">agentic</h1>
        <p class="muted">Sign in to this server's playground.</p>
        <label>
          User id
          <input name="user" autocomplete="username" value={user} onInput={(e) => setUser(e.currentTarget.value)} autofocus />
        </label>
        <label>
          API token <span class="muted">(when the server has one)</span>
          <input name="token" type="password" autocomplete="current-password" value={token} onInput={(e) => setToken(e.currentTarget.value)} />
        </label>
        <label class="check">
          <input name="remember" type="checkbox" checked={remember} onChange={(e) => setRemember(e.currentTarget.checked)} /> Remember me on this device{" "}
          <span class="muted small">(keeps the token in this browser's storage)</span>
        </label>
        {error && (
          <p class="error" role="alert">
            {error}
          </p>
        )}
        <button type="submit" disabled={busy}>
          Sign in
        </button>
      </form>
    </main>
  );
}

function Shell({ session, onSignOut, theme, nextTheme }) {
  const route = useRoute();
  const bus = useMemo(createBus, [session]);
  const [conversations, setConversations] = useState([]);
  const [capabilities, setCapabilities] = useState(null);
  const [stream, setStream] = useState("connecting");
  const [problem, setProblem] = useState(null);
  const [menuOpen, setMenuOpen] = useState(false);

  const refresh = useCallback(async () => {
    try {
      setConversations(await request(session, "GET", "/api/conversations"));
    } catch (error) {
      setProblem(error.message);
    }
  }, [session]);

  useEffect(() => {
    refresh();
    request(session, "GET", "/api/capabilities")
      .then(setCapabilities)
      .catch((error) => setProblem(error.message));
  }, [session, refresh]);

  useEffect(() => {
    const key = `agentic.lastEventId.${session.user}`;
    const follower = followEvents(session, {
      lastEventId: sessionStorage.getItem(key),
      onEvent(event) {
        if (event.id) sessionStorage.setItem(key, event.id);
        bus.emit(event);
        if (event.event === "conversation.updated" || event.event === "prompt.created") refresh();
      },
      onState(state, detail) {
        setStream(state);
        if (state === "failed") setProblem(detail);
        // Back after a drop: what failed meanwhile is read again.
        if (state === "live") {
          setProblem((current) => (current && current.startsWith("the server cannot be reached") ? null : current));
          refresh();
        }
      },
    });
    return () => follower.stop();
  }, [session, bus, refresh]);

  useEffect(() => setMenuOpen(false), [route.view, route.id]);
  useEffect(() => {
    if (!menuOpen) return undefined;
    const closeOnEscape = (event) => {
      if (event.key !== "Escape") return;
      setMenuOpen(false);
      document.querySelector(".menu-toggle")?.focus();
    };
    addEventListener("keydown", closeOnEscape);
    return () => removeEventListener("keydown", closeOnEscape);
  }, [menuOpen]);

  return (
    <div class={`shell ${menuOpen ? "menu-open" : ""}`}>
      <header class="topbar">
        <button class="icon menu-toggle" aria-label="Conversations" aria-expanded={menuOpen} onClick={() => setMenuOpen(!menuOpen)}>
          ☰
        </button>
        <strong class="brand">agentic</strong>
        <span class={`stream stream-${stream}`} title="event stream" aria-live="polite">
          {stream === "live" ? "live" : stream}
        </span>
        <span class="spacer" />
        <span class="muted who">{session.user}</span>
        <button class="icon" onClick={nextTheme} aria-label={`Theme: ${theme}`} title={`Theme: ${theme}`}>
          {theme === "dark" ? "☾" : theme === "light" ? "☀" : "◐"}
        </button>
        <button class="link" onClick={onSignOut}>
          Sign out
        </button>
      </header>
      <nav class="sidebar" aria-label="Conversations">
        <button class="new" onClick={() => go("/")}>
          + New conversation
        </button>
        <a href="#/tools" class={`nav-tools ${route.view === "tools" ? "current" : ""}`}>
          Tools
        </a>
        <ul class="conversations">
          {conversations.map((conversation) => (
            <li key={conversation.id}>
              <a
                href={`#/c/${conversation.id}`}
                class={route.id === conversation.id ? "current" : ""}
                aria-current={route.id === conversation.id ? "page" : undefined}
              >
                <span class="title">{conversation.title || "Untitled"}</span>
                <span class="muted small">
                  {new Date(conversation.updatedAt).toLocaleString()}
                  {conversation.activePromptId ? " · running" : ""}
                </span>
              </a>
            </li>
          ))}
          {conversations.length === 0 && <li class="muted empty">No conversations yet.</li>}
        </ul>
      </nav>
      <main class="content">
        {problem && (
          <p class="error banner" role="alert">
            {problem}{" "}
            <button class="link" onClick={() => setProblem(null)}>
              dismiss
            </button>
          </p>
        )}
        {route.view === "tools" ? (
          <ToolsView session={session} selected={route.id} />
        ) : (
          <ConversationView
            key={route.id || "new"}
            session={session}
            conversationId={route.id}
            bus={bus}
            capabilities={capabilities}
            onChanged={refresh}
          />
        )}
      </main>
    </div>
  );
}

// ----- a conversation -----

function ConversationView({ session, conversationId, bus, capabilities, onChanged }) {
  const [prompts, setPrompts] = useState([]);
  const [title, setTitle] = useState(null);
  const [loading, setLoading] = useState(Boolean(conversationId));
  const [error, setError] = useState(null);
  const promptIds = useRef(new Set());
  const pending = useRef([]);
  const loaded = useRef(!conversationId);
  const reads = useRef(0);
  const startedAt = useRef(performance.now());

  // Events come from the moment the view opens; those that arrive before the conversation is
  // loaded wait, then apply on top of it.
  const apply = useCallback((event) => {
    const data = event.data?.data ?? {};
    const promptId = data.promptId;
    if (!promptId) return;
    if (event.event === "prompt.created") {
      if (data.conversationId && data.conversationId === conversationId && !promptIds.current.has(promptId)) {
        promptIds.current.add(promptId);
        setPrompts((list) => (list.some((p) => p.id === promptId) ? list : [...list, newPrompt(promptId, "", data.mode)]));
      }
      return;
    }
    if (!promptIds.current.has(promptId)) return;
    if (event.event === "prompt.stream") stats.streamed[data.toolCallId ? "tool" : "text"] += 1;
    setPrompts((list) => list.map((prompt) => (prompt.id === promptId ? applyEvent(prompt, event.event, data) : prompt)));
    if (isFinished(stateAfter(event.event))) onChanged();
  }, [conversationId, onChanged]);

  const load = useCallback(async () => {
    if (!conversationId) return;
    // Events that come while the timeline is read wait and apply on top of it: a prompt just
    // sent in a new conversation publishes its first outputs before the read can see them.
    loaded.current = false;
    // Only the latest read applies: an older one answered last would draw an older timeline
    // over the events the newer one applied.
    const generation = ++reads.current;
    try {
      const detail = await request(session, "GET", `/api/conversations/${encodeURIComponent(conversationId)}`);
      if (generation !== reads.current) return;
      const list = detail.prompts.filter((stored) => stored.visible !== false).map(fromStored);
      promptIds.current = new Set(list.map((prompt) => prompt.id));
      setTitle(detail.title);
      setPrompts(list);
      setError(null);
    } catch (failure) {
      if (generation !== reads.current) return;
      setError(failure.status === 404 ? "This conversation does not exist, or is not yours." : failure.message);
    }
    setLoading(false);
    loaded.current = true;
    const waiting = pending.current;
    pending.current = [];
    waiting.forEach(apply);
  }, [session, conversationId, apply]);

  // Subscribed before the timeline is read: an event published before the read is in what
  // it reads (outputs are saved before they are published), and one published after it waits
  // for the read and applies on top. Read first, the events between a new conversation's
  // first outputs and the subscription were lost.
  useEffect(
    () =>
      bus.subscribe((event) => {
        if (event.event === "stream.gap" || event.event === "stream.lagged") {
          // Events that arrive while the timeline is read again apply on top of what it
          // reads, not under it.
          loaded.current = false;
          load();
          return;
        }
        if (!loaded.current) pending.current.push(event);
        else apply(event);
      }),
    [bus, apply, load],
  );

  useEffect(() => {
    load();
  }, [load]);

  useLayoutEffect(() => {
    if (!loading && stats.firstPaint === null && conversationId) {
      const now = performance.now();
      stats.firstPaint = { sinceNavigation: now, sinceOpen: now - startedAt.current, prompts: prompts.length };
    }
  }, [loading]);

  const send = async ({ input, mode, model }) => {
    const body = { input, mode, model };
    if (conversationId) body.conversationId = conversationId;
    const accepted = await request(session, "POST", "/api/prompt", body);
    if (!conversationId) {
      go(`/c/${accepted.conversationId}`);
      return;
    }
    if (!promptIds.current.has(accepted.promptId)) {
      promptIds.current.add(accepted.promptId);
      setPrompts((list) => [...list, newPrompt(accepted.promptId, input, mode)]);
    } else {
      setPrompts((list) => list.map((prompt) => (prompt.id === accepted.promptId ? { ...prompt, input } : prompt)));
    }
    onChanged();
  };

  const running = prompts.find((prompt) => !isFinished(prompt.state));
  // One function for every prompt's Retry, so a change to one prompt redraws no other.
  const sendRef = useRef(send);
  sendRef.current = send;
  const retry = useCallback(
    (prompt) => sendRef.current({ input: prompt.input, mode: prompt.mode, model: "normal" }).catch((failure) => setError(failure.message)),
    [],
  );
  // An interrupted prompt (its server stopped) runs on where it stopped; its events follow.
  const continuePrompt = (id) =>
    request(session, "POST", `/api/prompts/${id}/continue`)
      .then(() => setPrompts((list) => list.map((prompt) => (prompt.id === id ? continued(prompt) : prompt))))
      .catch((failure) => setError(failure.message));

  return (
    <section class="conversation" aria-label={title || "New conversation"}>
      <Scroller>
        <div class="column">
          <ConversationHeader
            session={session}
            conversationId={conversationId}
            title={title}
            busy={Boolean(running)}
            onRenamed={(renamed) => {
              setTitle(renamed);
              onChanged();
            }}
            onDeleted={() => {
              onChanged();
              go("/");
            }}
          />
          {conversationId && !loading && !error && (
            <Scopes session={session} conversationId={conversationId} version={prompts.map((prompt) => prompt.state).join()} />
          )}
          {error && (
            <p class="error" role="alert">
              {error}
            </p>
          )}
          {loading ? (
            <p class="muted">Loading…</p>
          ) : (
            <Timeline prompts={prompts} session={session} onContinue={continuePrompt} onRetry={running ? null : retry} />
          )}
          {!loading && !conversationId && (
            <p class="muted hint">Ask something below. Pick code mode to let the model write a script that calls the tools.</p>
          )}
        </div>
      </Scroller>
      <div class="column">
        <Composer
          capabilities={capabilities}
          running={running}
          onSend={send}
          onStop={() =>
            running &&
            request(session, "POST", `/api/prompts/${running.id}/cancel`).catch((failure) => setError(failure.message))
          }
        />
      </div>
    </section>
  );
}

/// The approval scopes in force in a conversation (a tool approved for the rest of a prompt or
/// for the conversation), each with what it approves, until when, and a Revoke button. Read
/// again whenever a prompt's state changes.
function Scopes({ session, conversationId, version }) {
  const [scopes, setScopes] = useState([]);
  const [error, setError] = useState(null);
  const load = useCallback(async () => {
    try {
      setScopes(await request(session, "GET", `/api/scopes?conversation=${encodeURIComponent(conversationId)}`));
      setError(null);
    } catch (failure) {
      setError(failure.message);
    }
  }, [session, conversationId]);
  useEffect(() => {
    load();
  }, [load, version]);
  const revoke = async (id) => {
    try {
      await request(session, "DELETE", `/api/scopes/${encodeURIComponent(id)}`);
      await load();
    } catch (failure) {
      setError(failure.message);
    }
  };
  if (scopes.length === 0 && !error) return null;
  return (
    <section class="scopes small" aria-label="approval scopes">
      <h2>Approved without asking</h2>
      <ul>
        {scopes.map((scope) => (
          <li key={scope.id} data-scope-id={scope.id}>
            <code>{scope.tool}</code> {scope.reach === "prompt" ? "for the rest of its prompt" : "in this conversation"}
            {scope.expiresAt ? ` until ${new Date(scope.expiresAt).toLocaleTimeString()}` : ""}{" "}
            <button type="button" class="link revoke" onClick={() => revoke(scope.id)} aria-label={`Revoke ${scope.tool}`}>
              Revoke
            </button>
          </li>
        ))}
      </ul>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
    </section>
  );
}

/// How far an approval reaches, as the approval panels offer it: this call only, the tool for
/// the rest of the prompt, or the tool in the conversation for an hour.
function ScopeChoice({ value, onChange, tools }) {
  return (
    <select class="scope-choice" aria-label="how far the approval reaches" value={value} onChange={(e) => onChange(e.currentTarget.value)}>
      <option value="">only this</option>
      <option value="prompt">and {tools} for the rest of this prompt</option>
      <option value="conversation">and {tools} in this conversation for an hour</option>
    </select>
  );
}

/// The `scope` of an approval's body for a [`ScopeChoice`] value.
function scopeBody(choice) {
  if (choice === "prompt") return { reach: "prompt" };
  if (choice === "conversation") return { reach: "conversation", expiresIn: "1h" };
  return null;
}

/// A conversation's title, and what can be done with the whole of it: rename, export, delete.
function ConversationHeader({ session, conversationId, title, busy, onRenamed, onDeleted }) {
  const [renaming, setRenaming] = useState(false);
  const [draft, setDraft] = useState("");
  const [confirming, setConfirming] = useState(false);
  const [error, setError] = useState(null);
  const path = conversationId ? `/api/conversations/${encodeURIComponent(conversationId)}` : null;
  if (!conversationId) return <h1 class="conversation-title">New conversation</h1>;
  const rename = async (event) => {
    event.preventDefault();
    setError(null);
    try {
      const renamed = await request(session, "PATCH", path, { title: draft });
      setRenaming(false);
      onRenamed(renamed.title);
    } catch (failure) {
      setError(failure.message);
    }
  };
  const exportConversation = async () => {
    setError(null);
    try {
      const detail = await request(session, "GET", path);
      const blob = new Blob([JSON.stringify(detail, null, 2) + "\n"], { type: "application/json" });
      const link = document.createElement("a");
      link.href = URL.createObjectURL(blob);
      link.download = `${fileName(detail.title || "conversation")}.json`;
      link.click();
      setTimeout(() => URL.revokeObjectURL(link.href), 60000);
    } catch (failure) {
      setError(failure.message);
    }
  };
  const remove = async () => {
    setError(null);
    try {
      await request(session, "DELETE", path);
      onDeleted();
    } catch (failure) {
      setConfirming(false);
      setError(failure.message);
    }
  };
  return (
    <header class="conversation-header">
      {renaming ? (
        <form class="rename" onSubmit={rename}>
          <input name="title" aria-label="Conversation title" value={draft} maxLength={200} required onInput={(e) => setDraft(e.currentTarget.value)} onKeyDown={(e) => e.key === "Escape" && setRenaming(false)} autofocus />
          <button type="submit">Save</button>
          <button type="button" class="link" onClick={() => setRenaming(false)}>
            Cancel
          </button>
        </form>
      ) : (
        <h1 class="conversation-title">{title || "…"}</h1>
      )}
      {!renaming && (
        <div class="conversation-actions">
          <button
            type="button"
            class="link rename"
            onClick={() => {
              setDraft(title || "");
              setRenaming(true);
            }}
          >
            Rename
          </button>
          <button type="button" class="link export" onClick={exportConversation}>
            Export
          </button>
          <button type="button" class="link delete" onClick={() => !busy && setConfirming(true)} aria-disabled={busy ? "true" : undefined} title={busy ? "A prompt is running" : undefined}>
            Delete
          </button>
        </div>
      )}
      {confirming && (
        <p class="confirm" role="alert">
          Delete this conversation and all its prompts? This cannot be undone.{" "}
          <button type="button" class="confirm-delete danger" onClick={remove} autofocus>
            Delete
          </button>{" "}
          <button type="button" class="link" onClick={() => setConfirming(false)}>
            Keep it
          </button>
        </p>
      )}
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
    </header>
  );
}

function fileName(title) {
  return title.replace(/[^\p{L}\p{N}]+/gu, "-").replace(/^-+|-+$/g, "").slice(0, 60) || "conversation";
}

/// The scrolling part of a conversation: it follows new output while the reader is at the
/// bottom, and stays put while they read further up.
function Scroller({ children }) {
  const box = useRef(null);
  const atBottom = useRef(true);
  useLayoutEffect(() => {
    const element = box.current;
    if (element && atBottom.current) element.scrollTop = element.scrollHeight;
  });
  const onScroll = () => {
    const element = box.current;
    if (element) atBottom.current = element.scrollHeight - element.scrollTop - element.clientHeight < 80;
  };
  return (
    <div class="scroller" ref={box} onScroll={onScroll}>
      {children}
    </div>
  );
}

function stateAfter(eventName) {
  return { "prompt.completed": "completed", "prompt.error": "failed", "prompt.cancelled": "cancelled" }[eventName] || "running";
}

function Timeline({ prompts, session, onContinue, onRetry }) {
  const drawnAt = useRef(0);
  useLayoutEffect(() => {
    const started = drawnAt.current;
    const outputs = prompts.reduce((sum, prompt) => sum + prompt.output.length, 0);
    stats.commits.push({ outputs, ms: started ? performance.now() - started : 0 });
    if (stats.commits.length > 5000) stats.commits.shift();
  });
  // When the list is about to be drawn: the time from here to the layout effect is the cost of
  // one change.
  drawnAt.current = performance.now();
  return (
    <ol class="timeline" aria-live="polite">
      {prompts.map((prompt, index) => (
        <PromptView
          key={prompt.id}
          number={index + 1}
          prompt={prompt}
          session={session}
          onRetry={onRetry}
          onContinue={index === prompts.length - 1 && prompt.state === "interrupted" ? onContinue : null}
        />
      ))}
    </ol>
  );
}

/// A prompt's outputs, grouped: code-mode scripts with their calls, tool cards, files,
/// reasoning and texts.
function OutputGroups({ prompt, groups, session, label, waiting, onEdit }) {
  const scripts = groups.filter((group) => group.kind === "code");
  return groups.map((group) =>
    group.kind === "code" ? (
      <CodeExecution
        key={group.output.id}
        label={scripts.length > 1 ? `script ${scripts.indexOf(group) + 1} of ${label}` : `script of ${label}`}
        execution={group.output}
        calls={group.calls}
        liveTool={prompt.liveTool}
        waiting={waiting}
        onEdit={onEdit}
      />
    ) : group.kind === "tool" ? (
      <ToolCard key={group.output.id} output={group.output} live={prompt.liveTool[group.output.id]} />
    ) : group.kind === "file" ? (
      <FileCard key={group.output.id} output={group.output} session={session} />
    ) : group.kind === "reasoning" ? (
      <Thinking key={group.output.id} output={group.output} />
    ) : group.kind === "text" ? (
      <Markdown key={group.output.id} text={group.output.content} />
    ) : null,
  );
}

const PromptView = memo(function PromptView({ number, prompt, session, onContinue, onRetry }) {
  const groups = useMemo(() => groupOutputs(prompt.output), [prompt.output]);
  const waiting = waitingCall(prompt);
  const time = promptTime(prompt);
  const [editing, setEditing] = useState(null);
  const finished = isFinished(prompt.state);
  return (
    <li class={`prompt state-${prompt.state}`} data-prompt-id={prompt.id}>
      {prompt.input && (
        <div class="bubble user">
          <div class="who small muted">you · {prompt.mode}</div>
          <div class="user-text">{prompt.input}</div>
        </div>
      )}
      <div class="bubble agent">
        <OutputGroups
          prompt={prompt}
          groups={groups}
          session={session}
          label={`prompt ${number}`}
          waiting={waiting}
          onEdit={finished ? (execution) => setEditing({ execution: execution.id, code: execution.input?.code ?? "" }) : null}
        />
        {prompt.live && <Markdown text={prompt.live} streaming />}
        {waiting && waiting.toolName === "code.plan" && (
          <PlanApproval
            key={waiting.toolCallId}
            prompt={prompt}
            waiting={waiting}
            session={session}
            execution={groups.find((group) => group.kind === "code" && group.output.id === waiting.input?.execution)}
          />
        )}
        {waiting && waiting.toolName !== "code.plan" && waiting.batch.length > 1 && (
          <PlanApproval
            key={waiting.toolCallId}
            prompt={prompt}
            waiting={waiting}
            session={session}
            calls={waiting.batch}
            title={`Approve these ${waiting.batch.length} calls?`}
            intro="They were asked for in one step and are decided together; none has run yet."
            outro="The calls you approve run; the others fail as rejected, and the model or script is told why."
            execution={groups.find((group) => group.kind === "code" && group.calls.some((call) => call.id === waiting.toolCallId))}
          />
        )}
        {waiting && waiting.toolName !== "code.plan" && waiting.batch.length <= 1 && (
          <Approval
            key={waiting.toolCallId}
            prompt={prompt}
            waiting={waiting}
            session={session}
            execution={groups.find((group) => group.kind === "code" && group.calls.some((call) => call.id === waiting.toolCallId))}
          />
        )}
        <footer class="prompt-footer small muted">
          <span class={`badge ${prompt.state}`}>{prompt.state.replace(/_/g, " ")}</span>
          {prompt.state === "running" && <span class="spinner" role="img" aria-label="running" />}
          {prompt.usage && prompt.usage.totalTokens > 0 && (
            <span class="usage">
              {prompt.usage.inputTokens} in · {prompt.usage.outputTokens} out tokens
              {prompt.usage.modelCalls ? ` · ${prompt.usage.modelCalls} model calls` : ""}
              {typeof prompt.usage.cost === "number" ? ` · $${prompt.usage.cost.toFixed(4)}` : ""}
            </span>
          )}
          {time !== null && <span class="time">{formatMs(time)}</span>}
          {prompt.error && prompt.state !== "cancelled" && <span class="error">{prompt.error}</span>}
          {onContinue && (
            <button type="button" class="continue" onClick={() => onContinue(prompt.id)}>
              Continue
            </button>
          )}
          {isFinished(prompt.state) && <CopyAnswer prompt={prompt} />}
          {finished && <SaveAsTest prompt={prompt} session={session} />}
          {onRetry && isFinished(prompt.state) && prompt.input && (
            <button type="button" class="link retry" onClick={() => onRetry(prompt)} aria-label={`Retry: ${prompt.input}`}>
              Retry
            </button>
          )}
        </footer>
        {editing && (
          <Rerun
            key={editing.execution}
            prompt={prompt}
            session={session}
            execution={editing.execution}
            initialCode={editing.code}
            onClose={() => setEditing(null)}
          />
        )}
      </div>
    </li>
  );
});

/// Downloads the prompt as a test case (YAML) that `agentic replay` and the test kit play
/// again without running a tool.
function SaveAsTest({ prompt, session }) {
  const [note, setNote] = useState(null);
  const save = () =>
    exportCase(session, prompt.id)
      .then((yaml) => {
        const name = `case-${prompt.id.slice(0, 8)}.yaml`;
        const url = URL.createObjectURL(new Blob([yaml], { type: "application/yaml" }));
        const link = document.createElement("a");
        link.href = url;
        link.download = name;
        document.body.appendChild(link);
        link.click();
        link.remove();
        setTimeout(() => URL.revokeObjectURL(url), 1000);
        stats.exported = { name, bytes: new TextEncoder().encode(yaml).length };
        setNote(`Saved ${name}`);
      })
      .catch((failure) => setNote(`Not saved: ${failure.message}`));
  return (
    <>
      <button type="button" class="link save-test" onClick={save}>
        Save as test
      </button>
      {note && (
        <span class="save-note" role="status">
          {note}
        </span>
      )}
    </>
  );
}

/// Edit one program of a prompt that ended and run it again against the prompt's recording:
/// the tools' recorded results answer its calls (nothing runs, nothing is stored), and the new
/// timeline shows beside the old one, with any call the recording lacks.
function Rerun({ prompt, session, execution, initialCode, onClose }) {
  const [code, setCode] = useState(initialCode);
  const [state, setState] = useState({ running: false, result: null, error: null });
  const run = () => {
    setState({ running: true, result: null, error: null });
    request(session, "POST", `/api/prompts/${prompt.id}/replay`, { code, execution })
      .then((result) => setState({ running: false, result, error: null }))
      .catch((failure) => setState({ running: false, result: null, error: failure.message }));
  };
  const before = useMemo(() => groupOutputs(prompt.output), [prompt.output]);
  const replayed = state.result ? fromStored(state.result.prompt) : null;
  const after = useMemo(() => (replayed ? groupOutputs(replayed.output) : []), [state.result]);
  return (
    <section class="replay" aria-label="Edit and re-run against the recording">
      <header>
        <strong>Edit and re-run</strong>
        <span class="small muted">the tools answer as they did then; nothing runs, nothing is stored</span>
      </header>
      <textarea
        class="replay-code"
        aria-label="program to re-run"
        spellcheck={false}
        value={code}
        rows={Math.min(20, Math.max(4, code.split("\n").length + 1))}
        onInput={(event) => setCode(event.currentTarget.value)}
      />
      <div class="replay-actions">
        <button type="button" class="rerun" disabled={state.running} onClick={run}>
          {state.running ? "Running…" : "Re-run against the recording"}
        </button>
        <button type="button" class="link" onClick={onClose}>
          Close
        </button>
      </div>
      {state.error && (
        <p class="error" role="alert">
          {state.error}
        </p>
      )}
      {replayed && (
        <>
          {state.result.divergences.length > 0 && (
            <div class="divergences" role="alert">
              <strong>Calls the recording does not have</strong> (each failed without running):
              <ul>
                {state.result.divergences.map((divergence) => (
                  <li key={divergence.call}>
                    call {divergence.call}: the program made <code>{divergence.made}</code>
                    {divergence.recorded ? (
                      <>
                        ; the recording has <code>{divergence.recorded}</code> next
                      </>
                    ) : (
                      "; the recording has no call left"
                    )}
                  </li>
                ))}
              </ul>
            </div>
          )}
          <div class="replay-compare">
            <div class="before">
              <div class="label small muted">before · {prompt.state}</div>
              <OutputGroups prompt={prompt} groups={before} session={session} label="the recorded run" waiting={null} onEdit={null} />
            </div>
            <div class="after">
              <div class="label small muted">after · {replayed.state}</div>
              <OutputGroups prompt={replayed} groups={after} session={session} label="the re-run" waiting={null} onEdit={null} />
            </div>
          </div>
        </>
      )}
    </section>
  );
}

/// Copies the prompt's answer (its text, as the model wrote it in markdown).
/// The model's reasoning, folded: it is how the answer was found, not the answer.
function Thinking({ output }) {
  const text = (output.text || "").trim();
  return (
    <details class="thinking">
      <summary class="small muted">{text ? "Thinking" : "Thinking (not shown by the provider)"}</summary>
      {text && <div class="thinking-text">{text}</div>}
    </details>
  );
}

function CopyAnswer({ prompt }) {
  const [done, setDone] = useState(null);
  const answer = prompt.output
    .filter((output) => output.type === "text")
    .map((output) => output.content)
    .join("\n\n");
  if (!answer) return null;
  const copy = () =>
    navigator.clipboard
      .writeText(answer)
      .then(() => setDone("Copied"))
      .catch((failure) => setDone(`Not copied: ${failure.message}`));
  return (
    <button type="button" class="link copy" onClick={copy}>
      {done || "Copy answer"}
    </button>
  );
}

const Markdown = memo(function Markdown({ text, streaming }) {
  const html = useMemo(() => markdown(text), [text]);
  return <div class={`markdown ${streaming ? "streaming" : ""}`} dangerouslySetInnerHTML={{ __html: html }} />;
});

const ToolCard = memo(function ToolCard({ output, live, nested, marked }) {
  const state = callState(output);
  // A rejected or cancelled call never ran (or was cut short): its span is a person's wait.
  const ms = state === "rejected" || state === "cancelled" ? null : duration(output);
  return (
    <details class={`tool ${state} ${nested ? "nested" : ""} ${marked ? "marked" : ""}`} open={state === "error" || state === "waiting"} data-tool={output.function}>
      <summary>
        <span class="tool-id">{output.function}</span>
        <span class={`badge ${state}`}>{state}</span>
        {ms !== null && <span class="muted small call-time">{formatMs(ms)}</span>}
        {output.decision && <span class="muted small decided-by">{decidedBy(output.decision)}</span>}
      </summary>
      <div class="tool-body">
        {output.decision && <DecisionNote decision={output.decision} />}
        <div class="label small muted">input</div>
        <pre class="json" tabindex="0">{prettyJson(output.input)}</pre>
        {live && (
          <>
            <div class="label small muted">live output</div>
            <pre class="live">{live}</pre>
          </>
        )}
        {output.result?.type === "success" && (
          <>
            <div class="label small muted">result</div>
            <pre class="json" tabindex="0">{prettyJson(output.result.output)}</pre>
          </>
        )}
        {output.result?.type === "error" && <pre class={state === "error" ? "error" : `ended ${state}`}>{output.result.error}</pre>}
        {output.result?.type === "pending" && <p class="muted small">{output.result.reason}</p>}
      </div>
    </details>
  );
});

/// "approved by alice", "rejected by [approval] timeout": who decided a call that waited.
function decidedBy(decision) {
  const words = { approve: "approved", approveOnly: "approved in part", reject: "rejected" };
  const word = words[decision.verdict?.type] || "decided";
  const who =
    decision.by?.type === "policy"
      ? decision.by.name
      : decision.by?.type === "scope"
        ? `a scope on ${decision.by.tool} that ${decision.by.grantedBy} granted`
        : decision.by?.userId || "someone";
  return `${word} by ${who}`;
}

/// The record of a decision: who, when, what the request said, and the reason given.
function DecisionNote({ decision }) {
  const at = new Date(decision.decidedAt);
  const reason = decision.verdict?.type === "reject" ? decision.verdict.reason : null;
  return (
    <p class="decision small" data-decided-by={decision.by?.type}>
      {decidedBy(decision)} at <time dateTime={decision.decidedAt}>{isNaN(at) ? decision.decidedAt : at.toLocaleTimeString()}</time>
      {decision.shown ? ` · asked: ${decision.shown}` : ""}
      {reason ? ` · “${reason}”` : ""}
    </p>
  );
}

function CodeBlock({ code, marks }) {
  const lines = useMemo(() => highlightLines(code), [code]);
  return (
    <pre class="code" tabindex="0">
      <code>
        {lines.map((html, index) => {
          const mark = marks?.[index + 1];
          return (
            <span key={index} class={`line ${mark ? "mark-" + mark : ""}`} data-line={index + 1}>
              <span class="ln" aria-hidden="true">
                {index + 1}
              </span>
              <span class="src" dangerouslySetInnerHTML={{ __html: html || " " }} />
            </span>
          );
        })}
      </code>
    </pre>
  );
}

/// Which lines of an execution's code to mark: the error's, and the one paused for approval.
function executionMarks(execution, calls, waiting) {
  const code = execution.input?.code ?? "";
  const result = execution.result || {};
  const marks = {};
  calls.forEach((call) => {
    if (call.result?.type === "error") {
      const line = errorLine(call.result.error);
      if (line) marks[line] = "error";
    }
  });
  const errored = result.type === "error" ? errorLine(result.error) : null;
  if (errored) marks[errored] = "error";
  let pausedLine = null;
  if (waiting) {
    const index = calls.findIndex((call) => call.id === waiting.toolCallId);
    if (index >= 0) {
      const nth = calls.slice(0, index).filter((call) => call.function === waiting.toolName).length;
      pausedLine = callLine(code, waiting.toolName, nth);
      if (pausedLine) marks[pausedLine] = "paused";
    }
  }
  return { marks, errored, pausedLine };
}

const CodeExecution = memo(function CodeExecution({ label, execution, calls, liveTool, waiting, onEdit }) {
  const code = execution.input?.code ?? "";
  const result = execution.result || {};
  const state = callState(execution);
  const { marks, errored, pausedLine } = executionMarks(execution, calls, waiting);
  const value = result.type === "success" ? result.output : null;
  const ms = duration(execution);
  return (
    <section class={`execution ${state}`} data-execution={execution.id} aria-label={label}>
      <header>
        <span class="tool-id">code.execute</span>
        <span class={`badge ${state}`}>{state}</span>
        {ms !== null && <span class="muted small call-time">{formatMs(ms)}</span>}
        {pausedLine && <span class="small paused-note">paused at line {pausedLine}</span>}
        {onEdit && (
          <button type="button" class="link edit-rerun" onClick={() => onEdit(execution)} aria-label={`Edit & re-run the ${label}`}>
            Edit &amp; re-run
          </button>
        )}
      </header>
      <CodeBlock code={code} marks={marks} />
      {calls.length > 0 && (
        <div class="calls" role="group" aria-label={`tool calls of the ${label}`}>
          <div class="label small muted">{calls.length} tool call{calls.length === 1 ? "" : "s"}</div>
          {calls.map((call) => (
            <ToolCard key={call.id} output={call} live={liveTool[call.id]} nested marked={waiting?.toolCallId === call.id} />
          ))}
        </div>
      )}
      {liveTool[execution.id] && <pre class="live">{liveTool[execution.id]}</pre>}
      {value && value.logs && value.logs.length > 0 && (
        <>
          <div class="label small muted">logs</div>
          <pre class="logs">{value.logs.join("\n")}</pre>
        </>
      )}
      {value && value.value !== undefined && value.value !== null && (
        <>
          <div class="label small muted">value</div>
          <pre class="json" tabindex="0">{prettyJson(value.value)}</pre>
        </>
      )}
      {result.type === "error" && (
        <pre class={state === "error" ? "error" : `ended ${state}`} data-error-line={errored || undefined}>
          {result.error}
        </pre>
      )}
    </section>
  );
});

function FileCard({ output, session }) {
  const [url, setUrl] = useState(null);
  const [error, setError] = useState(null);
  const image = output.mimeType?.startsWith("image/");
  useEffect(() => {
    let revoked = null;
    if (image) {
      fileUrl(session, output.path)
        .then((made) => {
          revoked = made;
          setUrl(made);
        })
        .catch((failure) => setError(failure.message));
    }
    return () => revoked && URL.revokeObjectURL(revoked);
  }, [output.path]);
  const download = async (event) => {
    event.preventDefault();
    try {
      const made = url || (await fileUrl(session, output.path));
      const link = document.createElement("a");
      link.href = made;
      link.download = output.path.split("/").pop();
      link.click();
    } catch (failure) {
      setError(failure.message);
    }
  };
  return (
    <figure class="file">
      {image && url && <img src={url} alt={output.description || output.path} />}
      <figcaption>
        <a href="#" onClick={download}>
          {output.path}
        </a>{" "}
        <span class="muted small">{output.mimeType}</span>
        {output.description && <div class="small">{output.description}</div>}
        {error && <div class="error small">{error}</div>}
      </figcaption>
    </figure>
  );
}

/// Where the focus went when an approval panel that had it went away (see `Approval`).
let focusHandedOff = null;

function Approval({ prompt, waiting, session, execution }) {
  const [reason, setReason] = useState("");
  const [scope, setScope] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const panel = useRef(null);
  useLayoutEffect(() => {
    const element = panel.current;
    // The next approval of a prompt whose last one had the focus takes it back from where
    // that one left it, unless the person has moved on (focused or typed elsewhere).
    const handed = focusHandedOff;
    if (handed && handed.promptId === prompt.id && document.activeElement === handed.element && handed.element.value === handed.value) {
      element?.focus();
    }
    focusHandedOff = null;
    return () => {
      if (!element || !element.contains(document.activeElement)) return;
      // The panel that had the focus goes once its call is decided: the focus moves on to
      // the next approval of the prompt, else to the message box, never to the page.
      setTimeout(() => {
        if (document.activeElement && document.activeElement !== document.body) return;
        const next = document.querySelector(`[data-prompt-id="${prompt.id}"] .approval`);
        if (next) {
          next.focus();
          return;
        }
        const composer = document.querySelector(".composer textarea");
        if (!composer) return;
        composer.focus();
        focusHandedOff = { promptId: prompt.id, element: composer, value: composer.value };
      });
    };
  }, []);
  const decide = async (decision) => {
    if (busy) return;
    setBusy(true);
    setError(null);
    try {
      const body = { toolCallId: waiting.toolCallId };
      if (decision === "reject" && reason.trim()) body.reason = reason.trim();
      if (decision === "approve" && scopeBody(scope)) body.scope = scopeBody(scope);
      await request(session, "POST", `/api/prompts/${prompt.id}/${decision}`, body);
    } catch (failure) {
      setError(failure.message);
      setBusy(false);
    }
  };
  const headingId = `approval-${waiting.toolCallId}`;
  // While a decision is on its way the buttons say so with aria-disabled rather than
  // disabled: a disabled button drops the keyboard focus to the page.
  return (
    <section class="approval" ref={panel} tabindex="-1" aria-labelledby={headingId}>
      <h2 id={headingId}>
        Approve <code>{waiting.toolName}</code>?
      </h2>
      <p>
        <Described text={waiting.reason || ""} />
      </p>
      <pre class="json" tabindex="0">{prettyJson(waiting.input)}</pre>
      {execution && <PausedCode execution={execution} waiting={waiting} />}
      <div class="actions">
        <button class="approve" aria-disabled={busy ? "true" : undefined} onClick={() => decide("approve")}>
          Approve
        </button>
        <ScopeChoice value={scope} onChange={setScope} tools={waiting.toolName} />
        <input aria-label="reason for rejecting" placeholder="Reason (optional)" value={reason} onInput={(e) => setReason(e.currentTarget.value)} onKeyDown={(e) => e.key === "Enter" && decide("reject")} />
        <button class="reject" aria-disabled={busy ? "true" : undefined} onClick={() => decide("reject")}>
          Reject
        </button>
      </div>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
    </section>
  );
}

/// A code-mode plan: what the program's dry run would do, each call with its input, line and
/// preview (a write's diff), the program beside it, and one decision for all of it: approve
/// all, approve the calls left ticked, or reject all.
function PlanApproval({ prompt, waiting, session, execution, calls: given, title, intro, outro }) {
  const calls = given ?? waiting.input?.calls ?? [];
  const caveats = given ? [] : waiting.input?.caveats ?? [];
  const [chosen, setChosen] = useState(() => calls.map(() => true));
  const [reason, setReason] = useState("");
  const [scope, setScope] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const count = chosen.filter(Boolean).length;
  const decide = async (decision) => {
    if (busy) return;
    setBusy(true);
    setError(null);
    try {
      const body = { toolCallId: waiting.toolCallId };
      if (decision === "approve" && count < calls.length) {
        body.calls = chosen.flatMap((on, index) => (on ? [index] : []));
      }
      if ((decision === "reject" || count < calls.length) && reason.trim()) body.reason = reason.trim();
      if (decision === "approve" && scopeBody(scope)) body.scope = scopeBody(scope);
      await request(session, "POST", `/api/prompts/${prompt.id}/${decision}`, body);
    } catch (failure) {
      setError(failure.message);
      setBusy(false);
    }
  };
  const marks = {};
  calls.forEach((call) => {
    if (call.line) marks[call.line] = "planned";
  });
  const headingId = `approval-${waiting.toolCallId}`;
  return (
    <section class="approval plan" tabindex="-1" aria-labelledby={headingId}>
      <h2 id={headingId}>{title ?? "Approve the plan?"}</h2>
      <p>
        {intro ?? (
          <>
            <Described text={waiting.reason || ""} />. Nothing of it has run: the program ran as a dry run.
          </>
        )}
      </p>
      <div class="plan-body">
        <ol class="plan-calls">
          {calls.map((call, index) => (
            <li key={index} class="plan-call" data-call={index}>
              <label>
                <input
                  type="checkbox"
                  checked={chosen[index]}
                  onChange={(event) => {
                    const on = event.currentTarget.checked;
                    setChosen((was) => was.map((value, at) => (at === index ? on : value)));
                  }}
                />{" "}
                <code>{call.tool}</code>
                {call.line ? <span class="muted small"> · line {call.line}</span> : null}
              </label>
              <p class="small">{call.reason}</p>
              <pre class="json" tabindex="0">{prettyJson(call.input)}</pre>
              {call.preview && (
                <pre class="diff" tabindex="0" aria-label={`what call ${index + 1} changes`}>
                  {call.preview.split("\n").map((line, at) => (
                    <span key={at} class={line.startsWith("+") && !line.startsWith("+++") ? "add" : line.startsWith("-") && !line.startsWith("---") ? "del" : ""}>
                      {line}
                      {"\n"}
                    </span>
                  ))}
                </pre>
              )}
            </li>
          ))}
        </ol>
        {execution && (
          <div class="plan-code">
            <div class="small muted">The program</div>
            <CodeBlock code={execution.output.input?.code ?? ""} marks={marks} />
          </div>
        )}
      </div>
      {caveats.length > 0 && (
        <ul class="caveats small">
          {caveats.map((caveat, index) => (
            <li key={index}>{caveat}</li>
          ))}
        </ul>
      )}
      <p class="small muted">{outro ?? "Then the program runs for real: the calls you approve run, and any other call that needs approval is asked about on its own."}</p>
      <div class="actions">
        <button class="approve" aria-disabled={busy || count === 0 ? "true" : undefined} onClick={() => count > 0 && decide("approve")}>
          {count === calls.length ? "Approve all" : `Approve ${count} of ${calls.length}`}
        </button>
        <ScopeChoice value={scope} onChange={setScope} tools={[...new Set(calls.filter((_, index) => chosen[index]).map((call) => call.tool))].join(", ") || "these tools"} />
        <input aria-label="reason for the calls not approved" placeholder="Reason (optional)" value={reason} onInput={(e) => setReason(e.currentTarget.value)} />
        <button class="reject" aria-disabled={busy ? "true" : undefined} onClick={() => decide("reject")}>
          Reject all
        </button>
      </div>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
    </section>
  );
}

/// The script of a code-mode prompt that waits, with the line of the waiting call marked.
function PausedCode({ execution, waiting }) {
  const { marks, pausedLine } = executionMarks(execution.output, execution.calls, waiting);
  return (
    <div class="paused-code">
      <div class="small muted">
        {pausedLine ? `The script is paused at line ${pausedLine}:` : "The script is paused in this code:"}
      </div>
      <CodeBlock code={execution.output.input?.code ?? ""} marks={marks} />
    </div>
  );
}

function Composer({ capabilities, running, onSend, onStop }) {
  const [input, setInput] = useState("");
  const [mode, setMode] = useState(() => localStorage.getItem("agentic.mode") || "code");
  const [model, setModel] = useState("normal");
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const modes = capabilities?.modes ?? [];
  useEffect(() => {
    if (modes.length && !modes.some((known) => known.id === mode)) setMode(modes[0].id);
  }, [capabilities]);
  useEffect(() => localStorage.setItem("agentic.mode", mode), [mode]);
  const submit = async (event) => {
    event?.preventDefault();
    const text = input.trim();
    if (!text || busy || running) return;
    setBusy(true);
    setError(null);
    try {
      await onSend({ input: text, mode, model });
      setInput("");
    } catch (failure) {
      setError(failure instanceof ApiError ? failure.message : String(failure));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="composer" onSubmit={submit}>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      <textarea
        name="input"
        aria-label="Message"
        placeholder={running ? "A prompt is running…" : "Message (Enter sends, Shift+Enter for a new line)"}
        value={input}
        rows={3}
        onInput={(e) => setInput(e.currentTarget.value)}
        onKeyDown={(e) => {
          if (e.key === "Enter" && !e.shiftKey && !e.isComposing) submit(e);
        }}
      />
      <div class="composer-row">
        <label>
          Mode{" "}
          <select name="mode" value={mode} onChange={(e) => setMode(e.currentTarget.value)}>
            {modes.map((known) => (
              <option key={known.id} value={known.id}>
                {known.name || known.id}
              </option>
            ))}
          </select>
        </label>
        <label>
          Model{" "}
          <select name="model" value={model} onChange={(e) => setModel(e.currentTarget.value)}>
            <option value="normal">normal{capabilities?.models?.normal ? ` (${capabilities.models.normal})` : ""}</option>
            <option value="high">high{capabilities?.models?.high ? ` (${capabilities.models.high})` : ""}</option>
          </select>
        </label>
        <span class="spacer" />
        {running ? (
          <button type="button" class="stop" onClick={onStop}>
            Stop
          </button>
        ) : (
          <button type="submit" class="send" disabled={busy || !input.trim()}>
            Send
          </button>
        )}
      </div>
    </form>
  );
}

// ----- tools -----

function ToolsView({ session, selected }) {
  const [tools, setTools] = useState(null);
  const [filter, setFilter] = useState("");
  const [error, setError] = useState(null);
  useEffect(() => {
    request(session, "GET", "/api/tools").then(setTools).catch((failure) => setError(failure.message));
  }, [session]);
  const matches = (tool) => (tool.id + " " + tool.description).toLowerCase().includes(filter.toLowerCase());
  // The open tool always stays in the list, whatever the filter left from before says.
  const shown = (tools || []).filter((tool) => tool.id === selected || matches(tool));
  return (
    <section class="tools" aria-labelledby="tools-title">
      <h1 id="tools-title">Tools</h1>
      {error && <p class="error">{error}</p>}
      <div class="tools-layout">
        <div class="tool-list">
          <input type="search" aria-label="Filter tools" placeholder="Filter" value={filter} onInput={(e) => setFilter(e.currentTarget.value)} />
          <ul>
            {shown.map((tool) => (
              <li key={tool.id}>
                <a href={`#/tools/${encodeURIComponent(tool.id)}`} class={selected === tool.id ? "current" : ""}>
                  <code>
                    {tool.id}
                    {tool.mayNeedApproval && <span class="badge waiting asks">asks approval</span>}
                  </code>
                  <span class="small muted">{tool.description}</span>
                </a>
              </li>
            ))}
          </ul>
        </div>
        {selected && <ToolDetail key={selected} session={session} id={selected} />}
      </div>
    </section>
  );
}

function ToolDetail({ session, id }) {
  const [tool, setTool] = useState(null);
  const [error, setError] = useState(null);
  const [result, setResult] = useState(null);
  const [values, setValues] = useState({});
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    request(session, "GET", `/api/tools/${encodeURIComponent(id)}`).then(setTool).catch((failure) => setError(failure.message));
  }, [id]);
  if (error && !tool) return <p class="error">{error}</p>;
  if (!tool) return <p class="muted">Loading…</p>;
  const schema = tool.inputSchema || {};
  const fields = formFields(schema);
  const invoke = async (event) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    setResult(null);
    try {
      const input = buildInput(fields, values);
      const answer = await request(session, "POST", `/api/tools/${encodeURIComponent(id)}/invoke`, input);
      setResult(answer.output);
    } catch (failure) {
      setError(
        failure.code === "approval_required"
          ? `This call needs approval, so it cannot run from here: ${failure.message}`
          : failure.message,
      );
    } finally {
      setBusy(false);
    }
  };
  return (
    <article class="tool-detail">
      <h2>
        <code>{tool.id}</code>
      </h2>
      <p>{tool.description}</p>
      {tool.plugin && <p class="small muted">from the {tool.plugin} plugin</p>}
      <form onSubmit={invoke} class="tool-form">
        {fields.map((field) => (
          <Field key={field.name} field={field} value={values[field.name]} onChange={(value) => setValues({ ...values, [field.name]: value })} />
        ))}
        {fields.length === 0 && <p class="small muted">This tool takes no input.</p>}
        {tool.mayNeedApproval && (
          <p class="small approval-note" role="note">
            Calls of this tool may need a person's approval. Those are refused here: ask for it in a prompt, where the call waits for you to approve it.
          </p>
        )}
        <button type="submit" disabled={busy}>
          Invoke
        </button>
      </form>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {result !== null && (
        <>
          <div class="label small muted">result</div>
          <pre class="json result">{prettyJson(result)}</pre>
        </>
      )}
      <details>
        <summary>Input schema</summary>
        <pre class="json" tabindex="0">{prettyJson(schema)}</pre>
      </details>
      {tool.outputSchema && (
        <details>
          <summary>Output schema</summary>
          <pre class="json" tabindex="0">{prettyJson(tool.outputSchema)}</pre>
        </details>
      )}
    </article>
  );
}

/// The form of a tool's input schema: required fields first, in the order the schema lists
/// them, then the others; each with the kind of control it needs and, for a choice, its
/// options (an `enum`, or a `oneOf`/`anyOf` of constants, possibly behind a local `$ref`).
function formFields(schema) {
  const properties = schema.properties || {};
  const required = schema.required || [];
  const names = [...required.filter((name) => name in properties), ...Object.keys(properties).filter((name) => !required.includes(name))];
  return names.map((name) => {
    const property = resolve(schema, properties[name]);
    const choices = choicesOf(schema, property);
    const types = Array.isArray(property.type) ? property.type : [property.type];
    const type = choices ? "enum" : types.find((t) => t && t !== "null") || "json";
    return {
      name,
      required: required.includes(name),
      description: property.description || properties[name].description || "",
      type,
      choices,
    };
  });
}

/// A schema with its local `$ref` (or a lone `allOf` member, or the non-null member of an
/// optional's `anyOf`) followed, keeping the referring schema's own description.
function resolve(root, schema, depth = 0) {
  if (!schema || typeof schema !== "object" || depth > 8) return schema || {};
  const { description } = schema;
  let target = null;
  if (typeof schema.$ref === "string" && schema.$ref.startsWith("#/")) {
    target = schema.$ref
      .slice(2)
      .split("/")
      .map((part) => part.replace(/~1/g, "/").replace(/~0/g, "~"))
      .reduce((node, part) => (node && typeof node === "object" ? node[part] : undefined), root);
  } else if (Array.isArray(schema.allOf) && schema.allOf.length === 1) {
    target = schema.allOf[0];
  } else {
    const members = schema.anyOf || schema.oneOf;
    const present = Array.isArray(members) ? members.filter((member) => member.type !== "null") : [];
    if (present.length === 1 && present.length < members.length) target = present[0];
  }
  if (!target) return schema;
  const resolved = resolve(root, target, depth + 1);
  return description ? { ...resolved, description } : resolved;
}

function choicesOf(root, property) {
  if (Array.isArray(property.enum)) return property.enum.filter((value) => value !== null).map((value) => ({ value, description: "" }));
  const members = property.oneOf || property.anyOf;
  if (!Array.isArray(members) || members.length === 0) return null;
  const choices = [];
  for (const member of members.map((one) => resolve(root, one))) {
    if (member.type === "null") continue;
    if ("const" in member) choices.push({ value: member.const, description: member.description || "" });
    else if (Array.isArray(member.enum)) choices.push(...member.enum.map((value) => ({ value, description: member.description || "" })));
    else return null;
  }
  return choices.length ? choices : null;
}

/// Text where `backticks` mark code, as tools' descriptions write it.
function Described({ text }) {
  const parts = text.split("`");
  // An unmatched backtick is kept as it is.
  if (parts.length % 2 === 0) return text;
  return parts.map((part, index) => (index % 2 ? <code key={index}>{part}</code> : part));
}

function Field({ field, value, onChange }) {
  const { name, type, required } = field;
  const label = (
    <span>
      <code>{name}</code>
      {required && (
        <>
          <span aria-hidden="true"> *</span>
          <span class="visually-hidden"> (required)</span>
        </>
      )}
      {field.description && (
        <span class="small muted">
          {" "}
          — <Described text={field.description} />
        </span>
      )}
    </span>
  );
  if (type === "boolean") {
    return (
      <label class="check">
        <input type="checkbox" name={name} checked={Boolean(value)} onChange={(e) => onChange(e.currentTarget.checked)} /> {label}
      </label>
    );
  }
  if (type === "enum") {
    return (
      <label>
        {label}
        <select name={name} value={value ?? ""} required={required} onChange={(e) => onChange(e.currentTarget.value)}>
          <option value="">—</option>
          {field.choices.map((choice) => (
            <option key={String(choice.value)} value={String(choice.value)}>
              {String(choice.value)}
              {choice.description ? ` — ${choice.description.replace(/`/g, "")}` : ""}
            </option>
          ))}
        </select>
      </label>
    );
  }
  if (type === "string" || type === "number" || type === "integer") {
    return (
      <label>
        {label}
        <input
          name={name}
          type={type === "string" ? "text" : "number"}
          step={type === "integer" ? 1 : "any"}
          required={required}
          value={value ?? ""}
          onInput={(e) => onChange(e.currentTarget.value)}
        />
      </label>
    );
  }
  return (
    <label>
      {label} <span class="small muted">(JSON)</span>
      <textarea name={name} rows={3} required={required} value={value ?? ""} onInput={(e) => onChange(e.currentTarget.value)} />
    </label>
  );
}

function buildInput(fields, values) {
  const input = {};
  for (const { name, type, choices } of fields) {
    const value = values[name];
    if (value === undefined || value === "") continue;
    if (type === "number" || type === "integer") input[name] = Number(value);
    else if (type === "boolean") input[name] = value;
    else if (type === "enum") {
      const choice = choices.find((option) => String(option.value) === value);
      input[name] = choice === undefined ? value : choice.value;
    } else if (type === "string") input[name] = value;
    else {
      try {
        input[name] = JSON.parse(value);
      } catch {
        throw new ApiError(0, "invalid_json", `${name} is not valid JSON`);
      }
    }
  }
  return input;
}

addEventListener("error", (event) => stats.errors.push(String(event.message)));
addEventListener("unhandledrejection", (event) => stats.errors.push(String(event.reason?.message || event.reason)));

render(<App />, document.getElementById("app"));
