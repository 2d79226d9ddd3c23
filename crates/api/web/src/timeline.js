// The timeline as data: prompts as the API stores them, kept current by events. Updates are
// immutable, so unchanged prompts and outputs keep their identity and are not drawn again.

/// A stored prompt (GET /api/prompts/:id, or one of a conversation's) as the view keeps it.
export function fromStored(stored) {
  return {
    id: stored.id,
    input: stored.input ?? "",
    mode: stored.mode,
    model: stored.model,
    state: stored.state,
    error: stored.error ?? null,
    usage: stored.usage ?? null,
    output: stored.output ?? [],
    live: "",
    liveTool: {},
    approval: null,
    createdAt: stored.createdAt ?? null,
    updatedAt: stored.updatedAt ?? null,
  };
}

export function newPrompt(id, input, mode) {
  return fromStored({
    id,
    input,
    mode,
    state: "running",
    output: [],
    createdAt: new Date().toISOString(),
  });
}

function upsertOutput(outputs, output) {
  const index = outputs.findIndex((existing) => existing.id === output.id);
  if (index < 0) return [...outputs, output];
  const next = outputs.slice();
  next[index] = output;
  return next;
}

/// The final timeline an event carries, reusing the outputs the view already has where nothing
/// changed, so a finished prompt of a thousand outputs is not drawn again from scratch.
function reconcile(previous, next) {
  if (!next) return previous;
  const known = new Map(previous.map((output) => [output.id, output]));
  let changed = next.length !== previous.length;
  const merged = next.map((output, index) => {
    const old = known.get(output.id);
    const same =
      old &&
      old.end === output.end &&
      old.type === output.type &&
      old.content === output.content &&
      old.result?.type === output.result?.type;
    if (!same || previous[index] !== old) changed = true;
    return same ? old : output;
  });
  return changed ? merged : previous;
}

const FINISHED = new Set(["completed", "failed", "interrupted", "cancelled"]);

export function isFinished(state) {
  return FINISHED.has(state);
}

/// Applies one event of the stream to a prompt; returns the prompt unchanged when the event is
/// not about it.
export function applyEvent(prompt, type, data) {
  switch (type) {
    case "prompt.output": {
      const output = data.output;
      const next = { ...prompt, output: upsertOutput(prompt.output, output) };
      if (output.type === "text") next.live = "";
      if (output.type === "tool" && output.result?.type !== "pending") {
        const liveTool = { ...prompt.liveTool };
        delete liveTool[output.id];
        next.liveTool = liveTool;
        if (prompt.approval && prompt.approval.toolCallId === output.id) next.approval = null;
      }
      if (next.state === "waiting_for_approval" && !next.approval) next.state = "running";
      // Output of an interrupted prompt means it runs again (continued, here or elsewhere).
      if (next.state === "interrupted") next.state = "running";
      return next;
    }
    case "prompt.stream": {
      const state = prompt.state === "interrupted" ? "running" : prompt.state;
      if (data.toolCallId) {
        const liveTool = { ...prompt.liveTool };
        liveTool[data.toolCallId] = (liveTool[data.toolCallId] || "") + data.delta;
        return { ...prompt, state, liveTool };
      }
      return { ...prompt, state, live: prompt.live + data.delta };
    }
    case "prompt.approval-requested":
      return {
        ...prompt,
        state: "waiting_for_approval",
        approval: {
          toolCallId: data.toolCallId,
          toolName: data.toolName,
          input: data.input,
          reason: data.reason,
        },
      };
    case "prompt.completed":
      return {
        ...prompt,
        state: "completed",
        output: reconcile(prompt.output, data.output),
        usage: data.usage ?? prompt.usage,
        live: "",
        approval: null,
        updatedAt: new Date().toISOString(),
      };
    case "prompt.cancelled":
      return {
        ...prompt,
        state: "cancelled",
        output: reconcile(prompt.output, data.output),
        usage: data.usage ?? prompt.usage,
        error: "cancelled",
        live: "",
        approval: null,
        updatedAt: new Date().toISOString(),
      };
    case "prompt.error":
      return {
        ...prompt,
        state: "failed",
        error: data.error,
        live: "",
        approval: null,
        updatedAt: new Date().toISOString(),
      };
    default:
      return prompt;
  }
}

/// A prompt that `POST /continue` accepted. The answer can arrive after the events of the
/// run it started (a fast prompt has completed by then), so it only moves a prompt that is
/// still interrupted: a state the event stream already gave is newer than the answer.
export function continued(prompt) {
  if (prompt.state !== "interrupted") return prompt;
  return { ...prompt, state: "running", error: null };
}

/// The call a stored prompt waits on, when it waits for approval (after a reload the event
/// that asked is gone; the pending result says it).
export function waitingCall(prompt) {
  const together = waitingTogether(prompt);
  if (prompt.approval) return { ...prompt.approval, batch: together };
  if (prompt.state !== "waiting_for_approval") return null;
  const waiting = prompt.output.find(
    (output) =>
      output.type === "tool" &&
      output.result?.type === "pending" &&
      output.result.reason !== "running",
  );
  if (!waiting) return null;
  return {
    toolCallId: waiting.id,
    toolName: waiting.function,
    input: waiting.input,
    reason: waiting.result.reason,
    batch: together,
  };
}

/// The calls one decision covers when there are several (a classic round's, or one request
/// of a script's): each marked as awaiting approval, in order. Empty for a single call.
function waitingTogether(prompt) {
  if (prompt.state !== "waiting_for_approval") return [];
  const marked = prompt.output.filter(
    (output) => output.type === "tool" && output.result?.type === "pending" && output.result.awaitingApproval,
  );
  return marked.length > 1 ? marked.map((call) => ({ tool: call.function, input: call.input, reason: call.result.reason, id: call.id })) : [];
}

/// The timeline grouped for display: a code-mode execution owns every tool call that follows
/// it until the next execution, as the interpreter counts a script's calls. Text and files in
/// between (a script's `output()`, say) do not end it: they keep their place after its card.
export function groupOutputs(outputs) {
  const groups = [];
  let execution = null;
  for (const output of outputs) {
    if (output.type === "tool" && output.function === "code.execute") {
      execution = { kind: "code", output, calls: [] };
      groups.push(execution);
    } else if (output.type === "tool" && execution) {
      execution.calls.push(output);
    } else {
      groups.push({ kind: output.type, output });
    }
  }
  return groups;
}

/// The line an error names: "(line 3, column 7)".
export function errorLine(message) {
  const found = /\(line (\d+), column \d+\)/.exec(message || "");
  return found ? Number(found[1]) : null;
}

/// How a tool id is spelled in a script: `kit.delete` is called as `kit.delete(` or as its
/// alias `kitDelete(`.
function spellings(toolId) {
  const alias = toolId.replace(/[._-]+([a-zA-Z0-9])/g, (_, letter) => letter.toUpperCase());
  return [toolId + "(", alias + "("];
}

/// The line of `code` that made the `nth` (0-based) call of `toolId`: the nth line calling it,
/// or the last such line when a loop made more calls than there are call sites.
export function callLine(code, toolId, nth) {
  const names = spellings(toolId);
  const lines = (code || "").split("\n");
  const sites = [];
  lines.forEach((line, index) => {
    if (names.some((name) => line.includes(name))) sites.push(index + 1);
  });
  if (sites.length === 0) return null;
  return sites[Math.min(nth, sites.length - 1)];
}

/// How a call stands or ended, for people: a rejection or a cancellation is a decision, not a
/// failure, and an interruption is the server's, not the tool's. Read from the error's kind,
/// never its words (which a release may reword).
const ERROR_STATES = {
  rejected: "rejected",
  cancelled: "cancelled",
  interrupted: "interrupted",
  interruptedWaiting: "interrupted",
  takenOver: "interrupted",
};

export function callState(output) {
  const result = output.result || {};
  if (result.type === "pending") {
    if (result.awaitingApproval) return "waiting";
    return result.reason === "running" ? "running" : "waiting";
  }
  if (result.type !== "error") return "ok";
  return ERROR_STATES[result.kind] || "error";
}

export function duration(output) {
  if (!output.start || !output.end) return null;
  const ms = Date.parse(output.end) - Date.parse(output.start);
  return Number.isFinite(ms) ? ms : null;
}

export function formatMs(ms) {
  if (ms === null || ms === undefined) return "";
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60000)} min ${Math.round((ms % 60000) / 1000)} s`;
}

/// How long a prompt took: from its creation to its last change, once it has finished.
export function promptTime(prompt) {
  if (!prompt.createdAt || !prompt.updatedAt || !isFinished(prompt.state)) return null;
  const ms = Date.parse(prompt.updatedAt) - Date.parse(prompt.createdAt);
  return Number.isFinite(ms) && ms >= 0 ? ms : null;
}
