// The sessiongate dashboard: one ES module, no framework, no build step.
//
// Every piece of text that comes from a conversation, a label or a platform reaches the page
// through `textContent` (the `h` helper below), never through HTML parsing, so a message such
// as `<img src=x onerror=alert(1)>` shows as text. The server's Content-Security-Policy forbids
// inline script and other origins as a second line of defence.

import { approvalsView } from "./approvals.js";
import { deadLettersView } from "./deliveries.js";
import { jobsView } from "./jobs.js";

const PAGE_SIZE = 50;
const TRANSCRIPT_PAGE = 100;
const POLL_MS = 5000;

const state = {
  csrf: null,
  auth: "token",
  view: null, // the current view's { refresh(), onEvent(event) }
  live: "connecting",
};

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// ------------------------------------------------------------------------- DOM and formatting

function h(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "class") node.className = value;
    else if (name === "text") node.textContent = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (name === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const dateFormat = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });

function when(iso) {
  if (!iso) return h("span", { class: "muted", text: "never" });
  const date = new Date(iso);
  return h("time", { datetime: iso, title: iso, text: dateFormat.format(date) });
}

function plural(n, one, many = one + "s") {
  return `${n.toLocaleString()} ${n === 1 ? one : many}`;
}

// A toast says what happened; a close button (or Escape) dismisses it. Errors stay until
// dismissed (or replaced by the next toast), other toasts go by themselves after a while.
function toast(message, kind = "info") {
  const box = document.getElementById("toast");
  box.replaceChildren(
    h("span", { class: "toast-text", text: message }),
    h("button", { type: "button", class: "toast-close", "aria-label": "Dismiss", title: "Dismiss (Esc)", text: "×", onclick: dismissToast }),
  );
  box.dataset.kind = kind;
  box.setAttribute("role", kind === "error" ? "alert" : "status");
  box.hidden = false;
  clearTimeout(toast.timer);
  if (kind !== "error") toast.timer = setTimeout(dismissToast, 6000);
}

function dismissToast() {
  clearTimeout(toast.timer);
  document.getElementById("toast").hidden = true;
}

document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && !document.getElementById("toast").hidden) dismissToast();
});

function confirmDialog(text) {
  const dialog = document.getElementById("confirm");
  document.getElementById("confirm-text").textContent = text;
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.showModal();
  });
}

function keyPath(key, rest = "") {
  return `/v1/sessions/${encodeURIComponent(key)}${rest}`;
}

function agentOf(key) {
  const parts = key.split(":");
  return parts[0] === "agent" && parts.length > 1 ? decodeURIComponent(parts[1]) : null;
}

// The chat's name as a person would say it: its label, the name the platform gave it, else
// the chat (and thread or participant) of its key, never the raw key.
function titleOf(row) {
  return row.label || row.title || row.display_name || chatOfKey(row.session_key);
}

function chatOfKey(key) {
  const parts = key.split(":");
  if (parts[0] !== "agent" || parts.length < 5) return key;
  const [, , , , chat, ...rest] = parts;
  const shown = [chat, ...rest.filter((p) => !p.startsWith("%f"))].map((p) => {
    try {
      return decodeURIComponent(p);
    } catch {
      return p;
    }
  });
  const fork = rest.some((p) => p.startsWith("%f")) ? " (fork)" : "";
  return shown.join(" · ") + fork;
}

function lastLine(row) {
  const last = row.last_message;
  if (!last) return h("span", { class: "preview muted", text: "no messages yet" });
  const who = last.notice ? `${last.notice}: ` : last.role === "user" ? "" : `${last.role}: `;
  return h("span", { class: last.notice ? "preview notice" : "preview" },
    who ? h("span", { class: "who", text: who }) : null, last.text || "(no text)");
}

// ------------------------------------------------------------------------------------- API

async function api(method, path, body) {
  const init = { method, credentials: "same-origin", headers: { Accept: "application/json" } };
  if (method !== "GET") init.headers["X-CSRF-Token"] = state.csrf;
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  if (response.status === 401 && state.auth === "token") {
    location.href = "/ui/login";
    throw new ApiError(401, "unauthorized", "signed out");
  }
  const isJson = (response.headers.get("content-type") || "").includes("json");
  const data = isJson ? await response.json() : null;
  if (!response.ok) {
    const error = data && data.error ? data.error : {};
    throw new ApiError(response.status, error.code || "error", error.message || response.statusText);
  }
  return data;
}

// The events of a `text/event-stream` body, parsed as they arrive.
async function* readEvents(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value.replace(/\r\n?/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let event = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (data.length) yield { event, data: JSON.parse(data.join("\n")) };
    }
  }
}

async function report(promise, done) {
  try {
    const result = await promise;
    if (done) toast(done);
    return result;
  } catch (error) {
    toast(error instanceof ApiError ? `${error.message} (${error.code})` : String(error), "error");
    return undefined;
  }
}

// ------------------------------------------------------------------------------- live feed

// One EventSource for the page. The browser resends `Last-Event-ID` when it reconnects, and the
// gateway answers with what was missed or a `reset` event (refetch everything). Where the feed
// cannot be reached the page falls back to polling, and says so.
const FEED_EVENTS = [
  "session.created", "session.updated", "session.archived", "session.deleted",
  "transcript.appended", "turn.started", "turn.finished", "queue.changed", "reset",
  "approval.requested", "approval.decided", "approval.expired", "delivery.failed",
  "job.started", "job.finished", "job.failed",
  "session.takeover", "session.handback",
];

function startFeed() {
  let pollTimer = null;
  const poll = () => {
    if (pollTimer === null) {
      setLive("polling");
      pollTimer = setInterval(() => state.view && state.view.refresh(), POLL_MS);
    }
  };
  const source = new EventSource("/v1/events");
  source.addEventListener("open", () => {
    clearInterval(pollTimer);
    pollTimer = null;
    setLive("live");
  });
  source.addEventListener("error", () => {
    // A dropped connection is retried by the browser itself (with Last-Event-ID); a refusal
    // (no feed on this gateway, signed out) closes the source for good, so poll instead.
    if (source.readyState === EventSource.CLOSED) {
      poll();
      setTimeout(() => {
        clearInterval(pollTimer);
        pollTimer = null;
        startFeed();
      }, 60_000);
    } else {
      setLive("reconnecting");
    }
  });
  for (const name of FEED_EVENTS) {
    source.addEventListener(name, (message) => {
      let data = {};
      try {
        data = JSON.parse(message.data || "{}");
      } catch {
        return;
      }
      const event = { type: name, ...data };
      if (state.view) {
        if (name === "reset") state.view.refresh();
        else if (state.view.onEvent) state.view.onEvent(event);
      }
    });
  }
}

function setLive(status) {
  state.live = status;
  const badge = document.getElementById("live");
  badge.textContent = status;
  badge.dataset.status = status;
}

function debounce(fn, ms) {
  let timer = null;
  return () => {
    clearTimeout(timer);
    timer = setTimeout(fn, ms);
  };
}

// ---------------------------------------------------------------------------------- router

function parseHash() {
  const hash = location.hash.replace(/^#/, "") || "/";
  const [path, query = ""] = hash.split("?");
  return { path, params: new URLSearchParams(query) };
}

function route() {
  const { path, params } = parseHash();
  const main = document.getElementById("main");
  main.replaceChildren();
  for (const link of document.querySelectorAll("[data-nav]")) link.removeAttribute("aria-current");
  let nav = "sessions";
  if (path.startsWith("/s/")) {
    state.view = sessionView(main, decodeURIComponent(path.slice(3)));
  } else if (path === "/ops") {
    nav = "ops";
    state.view = opsView(main);
  } else if (PAGES[path]) {
    nav = path.slice(1);
    state.view = PAGES[path](main, kit);
  } else {
    state.view = listView(main, params);
  }
  document.querySelector(`[data-nav="${nav}"]`).setAttribute("aria-current", "page");
  state.view.refresh();
}

// ------------------------------------------------------------------------------- list view

function listView(main, params) {
  const filters = {
    q: params.get("q") || "",
    platform: params.get("platform") || "",
    agent: params.get("agent") || "",
    archived: params.get("archived") === "true",
    unread: params.get("unread") || "",
    pinned: params.get("pinned") || "",
    offset: Number(params.get("offset") || 0),
  };
  const go = (changes) => {
    const next = { ...filters, ...changes };
    const query = new URLSearchParams();
    for (const [name, value] of Object.entries(next)) {
      if (value !== "" && value !== false && value !== 0) query.set(name, String(value));
    }
    location.hash = `#/?${query}`;
  };
  const search = h("input", {
    type: "search", id: "search", name: "q", value: filters.q, placeholder: "Search messages",
    "aria-label": "Search messages", autocomplete: "off",
  });
  const platform = h("input", {
    name: "platform", value: filters.platform, placeholder: "platform", "aria-label": "Platform",
    size: 10,
  });
  const agent = h("input", {
    name: "agent", value: filters.agent, placeholder: "agent", "aria-label": "Agent", size: 8,
  });
  const tri = (name, label) =>
    h("label", {},
      `${label} `,
      h("select", { name, "aria-label": label },
        h("option", { value: "", text: "any", selected: filters[name] === "" }),
        h("option", { value: "true", text: "yes", selected: filters[name] === "true" }),
        h("option", { value: "false", text: "no", selected: filters[name] === "false" })));
  const archived = h("input", { type: "checkbox", name: "archived", checked: filters.archived });
  const form = h("form", {
    class: "filters", role: "search",
    onsubmit: (event) => {
      event.preventDefault();
      const data = new FormData(form);
      go({
        q: (data.get("q") || "").trim(), platform: (data.get("platform") || "").trim(),
        agent: (data.get("agent") || "").trim(), archived: data.get("archived") === "on",
        unread: data.get("unread") || "", pinned: data.get("pinned") || "", offset: 0,
      });
    },
  },
  search, platform, agent, tri("unread", "Unread"), tri("pinned", "Pinned"),
  h("label", {}, archived, " archived"),
  h("button", { type: "submit", text: "Apply" }));
  const summary = h("p", { class: "summary", "aria-live": "polite" });
  const list = h("ul", { class: "sessions", id: "session-list" });
  const pager = h("nav", { class: "pager", "aria-label": "Pages" });
  main.append(h("h1", { text: "Sessions" }), form, summary, list, pager);

  let refreshes = 0; // only the latest refresh renders (an older read may answer last)
  async function refresh() {
    if (filters.q) return showSearch();
    const mine = ++refreshes;
    const query = new URLSearchParams({ limit: PAGE_SIZE, offset: filters.offset });
    if (filters.archived) query.set("archived", "true");
    for (const name of ["platform", "agent", "unread", "pinned"]) {
      if (filters[name]) query.set(name, filters[name]);
    }
    const page = await report(api("GET", `/v1/sessions?${query}`));
    if (!page || mine !== refreshes) return;
    const first = page.total ? filters.offset + 1 : 0;
    summary.textContent = `${first.toLocaleString()}–${(filters.offset + page.sessions.length).toLocaleString()} of ${plural(page.total, "session")}`;
    list.replaceChildren(...page.sessions.map(sessionItem));
    pager.replaceChildren(
      h("button", {
        type: "button", text: "Newer", disabled: filters.offset === 0,
        onclick: () => go({ offset: Math.max(0, filters.offset - PAGE_SIZE) }),
      }),
      h("button", {
        type: "button", text: "Older", disabled: !page.has_more,
        onclick: () => go({ offset: page.next_offset }),
      }),
    );
  }

  async function showSearch() {
    const result = await report(api("GET", `/v1/search?${new URLSearchParams({ q: filters.q, limit: 50 })}`));
    if (!result) return;
    const hits = result.results || result.hits || result;
    summary.textContent = `${plural(hits.length, "match", "matches")} for “${filters.q}”`;
    list.replaceChildren(...hits.map((hit) =>
      h("li", { class: "hit" },
        h("a", { href: `#/s/${encodeURIComponent(hit.session_key)}`, class: "title", text: hit.session_key }),
        h("span", { class: "role", text: hit.role }),
        h("p", { class: "snippet", text: hit.snippet }),
        when(hit.timestamp))));
    pager.replaceChildren();
  }

  return {
    refresh,
    onEvent: debounce(refresh, 300),
  };
}

function sessionItem(row) {
  const agent = agentOf(row.session_key);
  return h("li", { class: row.unread ? "session unread" : "session", dataset: { key: row.session_key } },
    h("a", { href: `#/s/${encodeURIComponent(row.session_key)}`, class: "title" },
      row.unread ? h("span", { class: "dot", "aria-hidden": "true" }) : null,
      row.pinned ? h("span", { class: "badge pin", text: "pinned" }) : null,
      h("span", { class: "name", text: titleOf(row) }),
      row.unread ? h("span", { class: "badge unread-badge", text: "unread" }) : null),
    h("span", { class: "meta" },
      h("span", { class: "platform", text: row.platform || "?" }),
      agent && agent !== "main" ? h("span", { class: "agent", text: agent }) : null,
      h("span", { class: "chat", text: row.chat_type }),
      row.message_count != null ? h("span", { class: "count", text: plural(row.message_count, "message") }) : null,
      row.archived ? h("span", { class: "badge", text: "archived" }) : null),
    h("span", { class: "activity" }, when(row.last_activity_at || row.updated_at)),
    lastLine(row),
    h("code", { class: "key", text: row.session_key }));
}

// The model that answers the next turn, as the side panel names it.
function modelOf(row) {
  const thinking = row.thinking_level_override ? ` · thinking ${row.thinking_level_override}` : "";
  if (row.model) return row.model + (row.model_override ? " (this session's choice)" : "") + thinking;
  if (row.agent_kind === "echo") return "none: the echo agent repeats each message";
  return "the agent's default" + thinking;
}

// ---------------------------------------------------------------------------- session view

function sessionView(main, key) {
  let row = null;
  // Whether an operator answers this chat instead of the agent (`/v1/sessions/{key}/takeover`).
  let takeover = null;
  let events = [];
  let hasMore = false;
  const header = h("div", { class: "session-head" });
  const details = h("dl", { class: "details" });
  const actions = h("div", { class: "actions", role: "toolbar", "aria-label": "Session actions" });
  const branches = h("ol", { class: "branches", "aria-label": "Branches" });
  const branchesHeading = h("h2", { text: "Branches" });
  const transcript = h("ol", { class: "transcript", id: "transcript", "aria-label": "Transcript" });
  const sentinel = h("li", { class: "sentinel" },
    h("button", { type: "button", class: "quiet", text: "Load earlier", onclick: () => loadEarlier() }));
  const composerText = h("textarea", {
    id: "composer", name: "text", rows: 3, placeholder: "Message the agent as the operator",
    "aria-label": "Message",
  });
  const streaming = h("div", { class: "streaming", "aria-live": "polite" });
  const sendButton = h("button", { type: "submit", text: "Send" });
  const composer = h("form", {
    class: "composer",
    onsubmit: (event) => {
      event.preventDefault();
      send();
    },
  }, composerText, sendButton, streaming);
  composerText.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      send();
    }
  });
  const pendingText = sessionStorage.getItem(`composer:${key}`);
  if (pendingText !== null) {
    composerText.value = pendingText;
    sessionStorage.removeItem(`composer:${key}`);
  }
  main.append(
    header,
    h("div", { class: "session-grid" },
      h("section", { class: "conversation", "aria-label": "Conversation" }, transcript, composer),
      h("aside", { class: "side" },
        h("h2", { text: "Session" }), details, actions,
        branchesHeading, branches)),
  );

  const observer = new IntersectionObserver((entries) => {
    if (entries.some((e) => e.isIntersecting) && hasMore) loadEarlier();
  });

  // Refreshes overlap (a feed event, the end of a Send): only the latest one renders, so an
  // older read answering last can never put back a transcript without the newest reply. The
  // transcript is read after the row, so it is never older than the counts beside it.
  let refreshes = 0;
  async function refresh() {
    const mine = ++refreshes;
    const [loaded, tips, held] = await Promise.all([
      report(api("GET", keyPath(key))),
      report(api("GET", keyPath(key, "/branches"))),
      api("GET", keyPath(key, "/takeover")).catch(() => null),
    ]);
    const page = loaded ? await report(api("GET", keyPath(key, `/transcript?limit=${TRANSCRIPT_PAGE}`))) : null;
    if (mine !== refreshes) {
      // Counted for the tests: a read overtaken by a newer one is dropped, never rendered.
      document.body.dataset.droppedReads = String(Number(document.body.dataset.droppedReads || 0) + 1);
      return;
    }
    if (!loaded) {
      header.replaceChildren(h("h1", { text: "Session not found" }), h("code", { text: key }));
      return;
    }
    row = loaded;
    takeover = held;
    renderRow();
    if (tips) renderBranches(tips.branches);
    if (page) {
      events = page.events;
      hasMore = page.has_more;
      renderTranscript(true);
    }
  }

  async function loadEarlier() {
    if (!hasMore || !events.length || loadEarlier.busy) return;
    loadEarlier.busy = true;
    try {
      const page = await report(api("GET", keyPath(key, `/transcript?limit=${TRANSCRIPT_PAGE}&before=${events[0].id}`)));
      if (!page) return;
      const scroller = document.scrollingElement;
      const before = scroller.scrollHeight;
      events = [...page.events, ...events];
      hasMore = page.has_more;
      renderTranscript(false);
      scroller.scrollTop += scroller.scrollHeight - before;
    } finally {
      loadEarlier.busy = false;
    }
  }

  function renderRow() {
    const flags = [
      row.pinned && "pinned", row.archived && "archived", row.unread && "unread",
      row.suspended && "suspended", row.resume_pending && "resume pending",
      takeover && takeover.taken_over && "taken over",
    ].filter(Boolean);
    header.replaceChildren();
    append(header, [
      h("h1", { text: titleOf(row) }),
      h("code", { class: "key", text: row.session_key }),
      h("span", { class: "flags" }, flags.map((f) => h("span", { class: "badge", text: f }))),
      row.parent_session_key
        ? h("span", { class: "parent" }, "fork of ",
          h("a", { href: `#/s/${encodeURIComponent(row.parent_session_key)}`, text: chatOfKey(row.parent_session_key) }))
        : null,
    ]);
    const item = (label, ...value) => [h("dt", { text: label }), h("dd", {}, ...value)];
    const tokens = `${(row.input_tokens || 0).toLocaleString()} in · ${(row.output_tokens || 0).toLocaleString()} out · ${(row.total_tokens || 0).toLocaleString()} total`;
    const cost = row.estimated_cost_usd != null
      ? `$${Number(row.estimated_cost_usd).toFixed(4)} (${row.cost_status || "estimated"})`
      : row.cost_status || "unknown";
    details.replaceChildren(...[
      item("Session id", h("code", { text: row.session_id })),
      item("Platform", row.platform || "?"),
      item("Chat", `${row.chat_type}${row.display_name ? ` · ${row.display_name}` : ""}`),
      item("Agent", agentOf(row.session_key) || "main"),
      item("Model", modelOf(row)),
      row.message_count != null ? item("Messages", String(row.message_count)) : [],
      item("Tokens", tokens),
      item("Cost", cost),
      item("Compactions", String(row.compaction_count || 0)),
      item("Created", when(row.created_at)),
      item("Last activity", when(row.last_activity_at || row.updated_at)),
      row.label ? item("Label", row.label) : [],
      takeover && takeover.taken_over
        ? item("Taken over", `by ${takeover.taken_by} · `, when(takeover.since),
          ...(takeover.resume_at ? [" · back to the agent ", when(takeover.resume_at)] : []))
        : [],
    ].flat());
    renderActions();
    renderComposer();
  }

  // An archived session takes no new work: the composer says so instead of failing on Send.
  // While the operator has taken the chat over, the composer is the reply box: what is sent
  // goes to the chat as the bot.
  function renderComposer() {
    const archived = Boolean(row && row.archived);
    const replying = Boolean(takeover && takeover.taken_over);
    composerText.disabled = archived;
    sendButton.disabled = archived;
    sendButton.textContent = replying ? "Reply" : "Send";
    composerText.setAttribute("aria-label", replying ? "Reply to the chat" : "Message");
    composerText.placeholder = archived
      ? "This session is archived: unarchive it to send"
      : replying ? "Reply to the chat as the bot (you have taken it over)"
        : "Message the agent as the operator";
  }

  function renderActions() {
    const patch = (body, done) => report(api("PATCH", keyPath(key), body), done).then((r) => r && refresh());
    const labelInput = h("input", { name: "label", value: row.label || "", "aria-label": "Label", placeholder: "label" });
    const modelInput = h("input", { name: "model", value: row.model_override || "", "aria-label": "Model", placeholder: "model (default)" });
    const thinking = h("select", { name: "thinking_level", "aria-label": "Thinking level" },
      ["", "off", "low", "medium", "high"].map((level) =>
        h("option", { value: level, text: level || "thinking: default", selected: (row.thinking_level_override || "") === level })));
    const resetMode = h("select", { name: "mode", "aria-label": "Reset mode" },
      h("option", { value: "new_session", text: "new session" }),
      h("option", { value: "boundary", text: "boundary" }));
    const taken = Boolean(takeover && takeover.taken_over);
    actions.replaceChildren(
      h("button", {
        type: "button", text: taken ? "Hand back" : "Take over",
        title: taken ? "Let the agent answer this chat again" : "Stop the agent here and answer the chat yourself",
        onclick: async () => {
          const result = await report(api(taken ? "DELETE" : "POST", keyPath(key, "/takeover")),
            taken ? "Handed back to the agent" : "Taken over: your replies go to the chat");
          if (result) refresh();
        },
      }),
      h("button", { type: "button", text: row.pinned ? "Unpin" : "Pin", onclick: () => patch({ pinned: !row.pinned }) }),
      h("button", {
        type: "button", text: row.archived ? "Unarchive" : "Archive",
        onclick: () => patch(row.archived ? { archived: false } : { archived: true, expected_session_id: row.session_id }),
      }),
      h("button", {
        type: "button", text: row.unread ? "Mark read" : "Mark unread",
        // The acknowledgement names the marker this tab saw: a newer mark made elsewhere is
        // never erased by it.
        onclick: async () => {
          if (!row.unread) return patch({ unread: true });
          const seen = row.marked_unread_at ?? null;
          const after = await report(api("PATCH", keyPath(key), { unread: false, expected_marked_unread_at: seen }));
          if (after && after.unread && after.marked_unread_at !== seen) {
            toast("Still unread: it was marked unread again elsewhere after this page loaded.");
          }
          refresh();
        },
      }),
      h("form", { class: "inline", onsubmit: (e) => { e.preventDefault(); patch({ label: labelInput.value.trim() || null }, "Label saved"); } },
        labelInput, h("button", { type: "submit", text: "Set label" })),
      h("form", { class: "inline", onsubmit: (e) => {
        e.preventDefault();
        patch({ model: modelInput.value.trim() || null, thinking_level: thinking.value || null }, "Model saved");
      } }, modelInput, thinking, h("button", { type: "submit", text: "Set model" })),
      h("button", {
        type: "button", text: "Compact",
        onclick: async () => {
          const result = await report(api("POST", keyPath(key, "/compact"), {}));
          if (!result) return;
          toast(result.compacted
            ? `Compacted: ${result.tokens_before} → ${result.tokens_after} tokens`
            : `Nothing to compact${result.reason ? `: ${result.reason}` : ""}`);
          refresh();
        },
      }),
      h("form", { class: "inline", onsubmit: async (e) => {
        e.preventDefault();
        if (!(await confirmDialog("Reset this conversation? The transcript stays, the next message starts afresh."))) return;
        const result = await report(api("POST", keyPath(key, "/reset"), { mode: resetMode.value }), "Reset");
        if (result) refresh();
      } }, resetMode, h("button", { type: "submit", text: "Reset" })),
      h("button", {
        type: "button", class: "danger", text: "Delete",
        onclick: async () => {
          if (!(await confirmDialog(`Delete ${row.session_key}? Its transcript is archived first.`))) return;
          const result = await report(api("DELETE", keyPath(key)), "Deleted");
          if (result) location.hash = "#/";
        },
      }),
    );
  }

  function renderBranches(tips) {
    // One branch (a new fork, a conversation never rewound) leaves nothing to switch to.
    branchesHeading.hidden = branches.hidden = tips.length < 2;
    branches.replaceChildren(...tips.map((tip) =>
      h("li", { class: tip.active ? "branch active" : "branch" },
        h("span", { class: "headline", text: tip.headline || "(empty)" }),
        h("span", { class: "muted", text: ` · ${plural(tip.message_count, "message")} · ` }),
        when(tip.updated_at),
        tip.active
          ? h("span", { class: "badge", text: "active" })
          : h("button", {
            type: "button", class: "quiet", text: "Switch",
            onclick: async () => {
              const done = await report(api("POST", keyPath(key, "/branches/switch"), { leaf_entry_id: tip.leaf_entry_id }), "Switched branch");
              if (done) refresh();
            },
          }))));
  }

  function renderTranscript(scrollToEnd) {
    transcript.replaceChildren(...(hasMore ? [sentinel] : []), ...events.map(renderEvent));
    if (hasMore) observer.observe(sentinel);
    else observer.disconnect();
    if (scrollToEnd) composer.scrollIntoView({ block: "end" });
  }

  function renderEvent(event) {
    const type = event.type;
    if (type === "message") return renderMessage(event);
    if (type === "compaction") {
      return h("li", { class: "boundary compaction" },
        h("details", {},
          h("summary", { text: `Compacted${event.tokens_before ? ` (${event.tokens_before} tokens before)` : ""}` }),
          h("p", { class: "text", text: event.summary || "" })));
    }
    if (type === "reset") return h("li", { class: "boundary reset", text: "Conversation reset here" });
    if (type === "branch_summary") {
      return h("li", { class: "boundary" },
        h("details", {}, h("summary", { text: "Summary of an abandoned branch" }),
          h("p", { class: "text", text: event.summary || "" })));
    }
    const note = {
      model_change: `Model changed to ${event.model || event.modelId || "default"}`,
      thinking_level_change: `Thinking level: ${event.thinking_level || event.thinkingLevel || "default"}`,
      label: `Label: ${event.label || ""}`,
      custom_message: event.content ? String(typeof event.content === "string" ? event.content : JSON.stringify(event.content)) : type,
    }[type] || type;
    return h("li", { class: "note", text: note });
  }

  function renderMessage(event) {
    const role = event.role || "?";
    const interrupted = event.metadata && event.metadata.interrupted;
    // A notice of the gateway in the agent's place (`failed`: the turn failed) is not a reply.
    const notice = event.metadata && event.metadata.gateway_notice;
    const failed = notice === "failed";
    const byOperator = event.metadata && event.metadata.written_by === "operator";
    const held = event.metadata && event.metadata.held === "takeover";
    const item = h("li", { class: `message ${role}${notice ? ` notice ${notice}` : ""}`, dataset: { id: event.id } },
      h("div", { class: "who" },
        h("span", { class: "role", text: notice ? "gateway" : role }), when(event.timestamp),
        interrupted ? h("span", { class: "badge", text: "interrupted" }) : null,
        failed ? h("span", { class: "badge failed-badge", text: "turn failed" }) : null,
        notice && !failed ? h("span", { class: "badge", text: notice }) : null,
        byOperator ? h("span", { class: "badge operator-badge", text: "operator" }) : null,
        held ? h("span", { class: "badge", text: "while taken over" }) : null));
    if (role === "tool") {
      append(item, [h("details", {},
        h("summary", { text: `Tool result${event.name ? `: ${event.name}` : ""}` }),
        h("pre", { text: contentText(event.content) }))]);
      return item;
    }
    const text = contentText(event.content);
    if (text) append(item, [h("p", { class: "text", text })]);
    for (const call of event.tool_calls || []) {
      const fn = call.function || {};
      append(item, [h("details", { class: "tool-call" },
        h("summary", { text: `Tool call: ${fn.name || "?"}` }),
        h("pre", { text: fn.arguments || "" }))]);
    }
    if (role === "user") {
      append(item, [h("div", { class: "message-actions" },
        h("button", { type: "button", class: "quiet", text: "Rewind to here", onclick: () => rewind(event.id) }),
        h("button", { type: "button", class: "quiet", text: "Fork from here", onclick: () => fork(event.id) }))]);
    }
    return item;
  }

  async function rewind(entryId) {
    const result = await report(api("POST", keyPath(key, "/rewind"), { entry_id: entryId }));
    if (!result) return;
    toast(`Rewound ${plural(result.rewound_count, "message")}`);
    composerText.value = result.editor_text || "";
    await refresh();
    composerText.focus();
  }

  async function fork(entryId) {
    const result = await report(api("POST", keyPath(key, "/fork"), { entry_id: entryId }));
    if (!result) return;
    // The spec: the child opens with the forked message in its composer.
    sessionStorage.setItem(`composer:${result.session_key}`, result.editor_text || "");
    location.hash = `#/s/${encodeURIComponent(result.session_key)}`;
    toast(`Forked into a new conversation: edit the message and send it here. ${titleOf(row)} is unchanged.`);
  }

  async function send() {
    const text = composerText.value.trim();
    if (!text || (row && row.archived)) return;
    if (takeover && takeover.taken_over) return reply(text);
    composerText.value = "";
    const bubble = h("p", { class: "text" });
    streaming.replaceChildren(h("span", { class: "role", text: "assistant" }), bubble);
    try {
      const post = (body) => fetch(keyPath(key, "/messages"), {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", Accept: "text/event-stream", "X-CSRF-Token": state.csrf },
        body: JSON.stringify(body),
      });
      let response = await post({ text, stream: true, user_name: "operator" });
      // A gateway without streaming refuses the field before accepting anything: ask again.
      if (response.status === 422 && state.streams !== true) {
        state.streams = false;
        response = await post({ text, user_name: "operator" });
      } else if (response.ok) {
        state.streams = true;
      }
      const type = response.headers.get("content-type") || "";
      if (!response.ok) {
        const data = type.includes("json") ? await response.json() : {};
        throw new ApiError(response.status, data.error?.code || "error", data.error?.message || response.statusText);
      }
      document.body.dataset.lastReply = type.includes("text/event-stream") ? "streamed" : "whole";
      if (type.includes("text/event-stream")) {
        // The text of the turn's completed messages; a `retry` voids what came after it (the
        // agent's model call started over), so a broken stream never shows its text twice.
        let settled = "";
        for await (const { event, data } of readEvents(response)) {
          if (event === "delta") bubble.textContent += data.text;
          else if (event === "message" && data.role === "assistant") settled = bubble.textContent;
          else if (event === "retry") bubble.textContent = settled;
          else if (event === "done") {
            document.body.dataset.streamedText = bubble.textContent;
            bubble.textContent = data.reply ?? bubble.textContent;
          } else if (event === "error") throw new ApiError(0, data.code, data.message);
        }
      } else {
        const data = await response.json();
        bubble.textContent = data.reply || `(${data.status})`;
      }
    } catch (error) {
      composerText.value = text;
      toast(error instanceof ApiError ? `${error.message} (${error.code})` : String(error), "error");
    }
    await refresh();
    streaming.replaceChildren();
  }

  // The operator's reply in a chat taken over: stored as the bot's message and sent to the chat.
  async function reply(text) {
    composerText.value = "";
    const result = await report(api("POST", keyPath(key, "/reply"), { text }));
    if (!result) composerText.value = text;
    else if (!result.sent) toast("Stored; the platform has not confirmed it yet (it is retried).");
    await refresh();
  }

  const refreshSoon = debounce(refresh, 200);
  return {
    refresh,
    onEvent: (event) => {
      if (event.session_key === key || (row && event.session_id === row.session_id)) {
        if (event.type === "session.deleted") location.hash = "#/";
        // While a reply streams into the composer's bubble, its messages arrive here too;
        // the stream's own end refreshes the transcript.
        else if (!streaming.childElementCount) refreshSoon();
      }
    },
  };
}

function contentText(content) {
  if (content === null || content === undefined) return "";
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content.map((part) => (typeof part === "string" ? part : part.text ?? `[${part.type || "part"}]`)).join("\n");
  }
  return JSON.stringify(content, null, 2);
}

// -------------------------------------------------------------------------- operations view

function opsView(main) {
  const body = h("div", { class: "ops" });
  main.append(h("h1", { text: "Operations" }), body);

  async function refresh() {
    const [ops, instances] = await Promise.all([
      report(api("GET", "/v1/ops")),
      api("GET", "/v1/instances").catch(() => null),
    ]);
    if (!ops) return;
    const table = (caption, headings, rows) =>
      h("table", {},
        h("caption", { text: caption }),
        h("thead", {}, h("tr", {}, headings.map((t) => h("th", { scope: "col", text: t })))),
        h("tbody", {}, rows.length ? rows : h("tr", {}, h("td", { colspan: headings.length, class: "muted", text: "none" }))));
    const link = (key) => h("a", { href: `#/s/${encodeURIComponent(key)}`, text: key });
    body.replaceChildren(
      h("p", { class: `verdict ${ops.verdict === "healthy" ? "ok" : "bad"}`, text: `Store: ${ops.verdict}` }),
      table("Store health", ["Check", "State", "Detail"], ops.health.map((c) =>
        h("tr", {}, h("td", { text: c.name }), h("td", { text: c.ok ? "ok" : "problem" }), h("td", { text: c.detail })))),
      table(`Lanes (${ops.queued_total} queued)`, ["Session", "Running turn", "Since", "Queued"], ops.lanes.map((lane) =>
        h("tr", {}, h("td", {}, link(lane.session_key)),
          h("td", { text: lane.running_turn_id ? `#${lane.running_turn_id} (attempt ${lane.attempt})` : "idle" }),
          h("td", {}, lane.running_since ? when(lane.running_since) : ""),
          h("td", { text: String(lane.queued) })))),
      table(`Undelivered replies (${ops.undelivered_total})`, ["Turn", "Session", "Reply", "Replied", ""], ops.undelivered.map((item) =>
        h("tr", {}, h("td", { text: `#${item.turn_id}` }), h("td", {}, link(item.session_key)),
          h("td", { text: item.reply_preview }), h("td", {}, when(item.replied_at)),
          h("td", {}, h("button", {
            type: "button", text: "Retry",
            onclick: async () => {
              const result = await report(api("POST", `/v1/ops/deliveries/${item.turn_id}/retry`));
              if (result) toast(result.delivered ? "Delivered" : "Still undeliverable; retrying in the background");
              refresh();
            },
          }))))),
      table("Incognito sessions (in memory only)", ["Session", "Platform", "Last activity"], ops.incognito.map((row) =>
        h("tr", {}, h("td", {}, link(row.session_key)), h("td", { text: row.platform || "?" }),
          h("td", {}, when(row.last_activity_at || row.updated_at))))),
      instances && instances.instances
        ? table("Instances", ["Instance", "State", "Heartbeat", "Lanes", "Leads"], instances.instances.map((i) =>
          h("tr", {},
            h("td", { text: `${i.instance_id}${i.this ? " (this one)" : ""} · ${i.host}:${i.pid}` }),
            h("td", { text: i.state }),
            h("td", { text: `${Number(i.heartbeat_age_s).toFixed(1)} s ago` }),
            h("td", { text: String(i.lanes ?? 0) }),
            h("td", { text: (i.leader_of || []).join(", ") || "—" }))))
        : h("p", { class: "muted", text: "One instance (embedded SQLite store)." }),
    );
  }

  // The health checks read the whole search index, so a busy gateway's stream of events
  // refreshes this page at most every few seconds, and only for what it lists.
  const refreshSoon = debounce(refresh, 3000);
  return {
    refresh,
    onEvent: (event) => {
      if (event.type.startsWith("turn.") || event.type === "queue.changed") refreshSoon();
    },
  };
}

// ------------------------------------------------------------- jobs, dead letters, approvals

// Each of these pages is a module of its own (`jobs.js`, `deliveries.js`, `approvals.js`); it
// gets the helpers it shares with the rest of the dashboard here and imports nothing itself.
const kit = { h, api, report, when, toast, confirmDialog, plural, debounce, ApiError, pollMs: POLL_MS };
const PAGES = { "/jobs": jobsView, "/deliveries": deadLettersView, "/approvals": approvalsView };

// ------------------------------------------------------------------------------------ boot

async function boot() {
  const response = await fetch("/ui/session", { credentials: "same-origin" });
  if (response.status === 401) {
    location.href = "/ui/login";
    return;
  }
  const session = await response.json();
  state.csrf = session.csrf_token;
  state.auth = session.auth;
  document.getElementById("logout-csrf").value = session.csrf_token;
  if (session.auth === "open") document.getElementById("logout").hidden = true;
  document.addEventListener("keydown", (event) => {
    const typing = ["INPUT", "TEXTAREA", "SELECT"].includes(document.activeElement?.tagName);
    if (event.key === "/" && !typing) {
      const search = document.getElementById("search");
      if (search) {
        event.preventDefault();
        search.focus();
      }
    }
  });
  window.addEventListener("hashchange", route);
  route();
  startFeed();
}

boot();
