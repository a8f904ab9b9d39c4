// The A2A Inspector page. Everything an agent sends is put into the page
// as text (textContent, attribute values checked), never as markup.

const $ = (id) => document.getElementById(id);

/** An element with attributes and children (strings become text nodes). */
function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

const str = (v) => (typeof v === "string" ? v : v === undefined || v === null ? "" : JSON.stringify(v));
const arr = (v) => (Array.isArray(v) ? v : []);
const obj = (v) => (v && typeof v === "object" && !Array.isArray(v) ? v : {});
const pretty = (v) => JSON.stringify(v, null, 2);
// For the wire log: long strings (inline file bytes) cut, their length given.
const clipped = (v) => JSON.stringify(v, (k, x) => (typeof x === "string" && x.length > 300 ? `${x.slice(0, 120)}… (${x.length} characters)` : x), 2);
// The short form of an id: its last 8 characters (the random tail of a
// time-ordered UUID, whose start is shared by ids made close together).
const short = (s) => (s && s.length > 12 ? "…" + s.slice(-8) : s || "");
const stateName = (s) => str(s).replace(/^TASK_STATE_/, "").toLowerCase().replace(/_/g, "-");

async function api(path, opts = {}) {
  const init = { method: opts.method || (opts.body !== undefined ? "POST" : "GET"), headers: {} };
  if (opts.body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(opts.body);
  }
  const res = await fetch(path, init);
  let body;
  try { body = await res.json(); } catch { body = { error: { message: `HTTP ${res.status}` } }; }
  if (!res.ok) {
    const e = new Error(str(obj(body.error).message) || `HTTP ${res.status}`);
    e.hint = str(obj(body.error).hint);
    e.body = body;
    throw e;
  }
  return body;
}

function showError(where, e) {
  where.hidden = false;
  where.replaceChildren(el("div", {}, el("strong", {}, "Error: "), e.message, e.hint ? el("div", {}, "Hint: ", e.hint) : null));
}

// ----- tabs (arrow keys move between them) ------------------------------
const tabs = [...document.querySelectorAll('[role="tab"]')];
function select(tab) {
  for (const t of tabs) {
    const on = t === tab;
    t.setAttribute("aria-selected", String(on));
    t.tabIndex = on ? 0 : -1;
    $(t.getAttribute("aria-controls")).hidden = !on;
  }
  tab.focus();
  const name = tab.id.slice(4);
  if (name === "wire") renderWire();
  if (name === "timeline") refreshTimelineTasks();
  if (name === "versions") loadVersions();
  if (name === "webhook") loadDeliveries();
}
for (const t of tabs) {
  t.addEventListener("click", () => select(t));
  t.addEventListener("keydown", (ev) => {
    const i = tabs.indexOf(t);
    if (ev.key === "ArrowRight") select(tabs[(i + 1) % tabs.length]);
    if (ev.key === "ArrowLeft") select(tabs[(i + tabs.length - 1) % tabs.length]);
  });
}
const show = (name) => select($(`tab-${name}`));

// ----- connect ------------------------------------------------------------
let connected = null;

function renderCard(info) {
  connected = info;
  const card = obj(info.card);
  const box = $("card");
  const caps = obj(card.capabilities);
  const sel = obj(info.selected);
  $("status").textContent = `connected to ${str(card.name) || "(unnamed agent)"} via ${str(sel.binding)} ${str(sel.url)}`;
  const problems = arr(info.problems);
  const valid = problems.length === 0
    ? el("p", { class: "ok", id: "card-valid" }, "Valid: the card has every field A2A 1.0 requires.")
    : el("div", { class: "bad", id: "card-valid" }, el("p", {}, `Invalid: ${problems.length} problem(s)`), el("ul", {}, problems.map((p) => el("li", {}, str(p)))));
  const skills = arr(card.skills).map((s) => {
    s = obj(s);
    return el("div", { class: "skill" },
      el("strong", {}, str(s.name) || str(s.id)), " ", el("code", {}, str(s.id)),
      el("p", {}, str(s.description)),
      arr(s.tags).map((t) => el("span", { class: "chip" }, str(t))),
      arr(s.examples).length ? el("div", {}, "Examples: ", arr(s.examples).map((x) =>
        el("button", { type: "button", class: "chip", onclick: () => { $("chat-text").value = str(x); show("chat"); $("chat-text").focus(); } }, str(x)))) : null);
  });
  const ifaces = arr(card.supportedInterfaces).map((i) => {
    i = obj(i);
    const b = str(i.protocolBinding);
    const usable = arr(info.available).includes(b.toUpperCase());
    return el("li", {}, el("code", {}, b), " ", str(i.url), ` (protocol ${str(i.protocolVersion) || "?"})`,
      i.tenant ? ` tenant ${str(i.tenant)}` : "",
      b === sel.binding && str(i.url) === str(sel.url) ? el("strong", {}, " ← in use") : "",
      usable ? "" : el("span", { class: "warn" }, " (not usable by this build)"));
  });
  const schemes = Object.entries(obj(card.securitySchemes)).map(([name, s]) =>
    el("li", {}, el("code", {}, name), " ", Object.keys(obj(s)).join(", "), el("pre", {}, pretty(s))));
  const capList = Object.entries(caps).map(([k, v]) => el("span", { class: "chip" }, `${k}: ${str(v)}`));
  const provider = obj(card.provider);
  box.replaceChildren(el("div", { class: "card" },
    el("h2", { id: "card-name" }, str(card.name) || "(unnamed agent)"),
    el("p", {}, str(card.description)),
    valid,
    el("dl", {},
      el("dt", {}, "Version"), el("dd", {}, str(card.version)),
      el("dt", {}, "Provider"), el("dd", {}, [str(provider.organization), str(provider.url)].filter(Boolean).join(" ") || "-"),
      el("dt", {}, "Source"), el("dd", {}, str(info.location)),
      el("dt", {}, "Signature"), el("dd", { id: "card-signature", "data-status": str(info.signatureStatus), class: info.signatureStatus === "trusted" ? "ok" : info.signatureStatus === "invalid" ? "bad" : info.signatureStatus === "agent-key" ? "" : "warn" }, str(info.signature)),
      el("dt", {}, "Capabilities"), el("dd", {}, capList.length ? capList : "none declared"),
      el("dt", {}, "Input modes"), el("dd", {}, arr(card.defaultInputModes).join(", ")),
      el("dt", {}, "Output modes"), el("dd", {}, arr(card.defaultOutputModes).join(", "))),
    el("h3", {}, "Interfaces"), el("ul", {}, ifaces),
    el("h3", {}, "Security schemes"), schemes.length ? el("ul", {}, schemes) : el("p", {}, "none: anyone may call it"),
    el("h3", {}, `Skills (${skills.length})`), skills,
    el("details", {}, el("summary", {}, "The card as received (JSON)"), el("pre", {}, pretty(card)))));
}

$("connect-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  $("connect-error").hidden = true;
  $("card").replaceChildren(el("p", {}, "Connecting…"));
  try {
    const info = await api("/api/connect", { body: { agent: $("agent").value, binding: $("binding").value, bearer: $("bearer").value, apiKey: $("apikey").value } });
    renderCard(info);
  } catch (e) {
    $("card").replaceChildren();
    if (e.body && e.body.legacy) e.hint = (e.hint ? e.hint + " " : "") + "This looks like an A2A 0.x card: the agent speaks an older protocol version.";
    showError($("connect-error"), e);
  }
});

// ----- chat ---------------------------------------------------------------
const tasks = new Map(); // taskId -> {events: [], node}
let contextId = "";

function taskOf(id) {
  if (!tasks.has(id)) {
    const node = el("div", { class: "msg agent", "data-task": id });
    $("chat-log").append(node);
    tasks.set(id, { events: [], node });
  }
  return tasks.get(id);
}

function partsView(parts, mediaHint, nameHint) {
  return arr(parts).map((p) => partView(obj(p), mediaHint, nameHint));
}

function markdown(text) {
  // Simple formatting of Markdown, all as text: headings, list items,
  // **bold** and `code`; nothing of the source becomes markup.
  const box = el("div", { class: "md" });
  let list = null, table = null;
  for (const line of text.split("\n")) {
    // A table row: | a | b |; the |---| line under the head is skipped.
    if (/^\s*\|.*\|\s*$/.test(line)) {
      list = null;
      const cells = line.trim().slice(1, -1).split(/(?<!\\)\|/).map((c) => c.trim().replace(/\\\|/g, "|"));
      if (cells.every((c) => /^:?-+:?$/.test(c))) continue;
      if (!table) { table = el("table"); box.append(table); table.append(el("tr", {}, cells.map((c) => el("th", {}, inline(c))))); }
      else table.append(el("tr", {}, cells.map((c) => el("td", {}, inline(c)))));
      continue;
    }
    table = null;
    const h = /^(#{1,6})\s+(.*)$/.exec(line);
    const li = /^\s*(?:[-*+]|\d+\.)\s+(.*)$/.exec(line);
    if (li) {
      if (!list) { list = el("ul"); box.append(list); }
      list.append(el("li", {}, inline(li[1])));
      continue;
    }
    list = null;
    if (h) box.append(el("h4", {}, inline(h[2])));
    else if (line.trim()) box.append(el("p", {}, inline(line)));
  }
  return box;
}
function inline(s) {
  const out = [];
  const re = /(\*\*[^*]+\*\*|`[^`]+`)/g;
  let last = 0, m;
  while ((m = re.exec(s))) {
    out.push(s.slice(last, m.index));
    out.push(m[0].startsWith("**") ? el("strong", {}, m[0].slice(2, -2)) : el("code", {}, m[0].slice(1, -1)));
    last = m.index + m[0].length;
  }
  out.push(s.slice(last));
  return out;
}

function partView(p, mediaHint = "", nameHint = "") {
  const mt = str(p.mediaType) || mediaHint;
  const name = str(p.filename) || nameHint;
  if (typeof p.text === "string") {
    if (mt.includes("markdown") || /\.md$/i.test(name)) return markdown(p.text);
    if (mt.includes("json")) {
      try { return el("pre", {}, pretty(JSON.parse(p.text))); } catch { /* shown as text */ }
    }
    return el("div", { class: "text" }, p.text);
  }
  if (p.data !== undefined) return el("pre", { class: "data" }, pretty(p.data));
  if (typeof p.raw === "string") {
    const safeMt = /^[\w.+-]+\/[\w.+-]+$/.test(mt) ? mt : "application/octet-stream";
    const b64 = p.raw.replace(/[^A-Za-z0-9+/=_-]/g, "");
    const href = `data:${safeMt};base64,${b64}`;
    if (/^image\/(png|jpeg|gif|webp)$/.test(safeMt)) return el("img", { src: href, alt: name || "image" });
    return el("a", { href, download: name || "download" }, `Download ${name || "file"} (${safeMt})`);
  }
  if (typeof p.url === "string") {
    const ok = /^https?:\/\//i.test(p.url);
    return ok ? el("a", { href: p.url, rel: "noopener noreferrer", target: "_blank" }, `${name || p.url} (link)`) : el("span", {}, `link: ${p.url}`);
  }
  return el("pre", { class: "bad" }, "A part of unknown kind: " + pretty(p));
}

/** Re-draws a task's bubble from all its events (idempotent). */
function renderTask(id) {
  const t = taskOf(id);
  let state = "", statusMsg = null;
  const artifacts = new Map();
  const order = [];
  const addArtifact = (a, append) => {
    a = obj(a);
    const key = str(a.artifactId) || str(a.name) || String(order.length);
    if (!artifacts.has(key)) { artifacts.set(key, { name: str(a.name), parts: [] }); order.push(key); }
    const cur = artifacts.get(key);
    if (append) cur.parts.push(...arr(a.parts)); else cur.parts = [...arr(a.parts)];
    if (a.name) cur.name = str(a.name);
  };
  for (const ev of t.events) {
    const e = obj(ev);
    if (e.task) {
      const task = obj(e.task);
      if (task.contextId) contextId = str(task.contextId);
      state = stateName(obj(task.status).state) || state;
      statusMsg = obj(task.status).message || statusMsg;
      for (const a of arr(task.artifacts)) addArtifact(a, false);
    } else if (e.statusUpdate) {
      const u = obj(e.statusUpdate);
      if (u.contextId) contextId = str(u.contextId);
      state = stateName(obj(u.status).state) || state;
      if (obj(u.status).message) statusMsg = obj(u.status).message;
    } else if (e.artifactUpdate) {
      const u = obj(e.artifactUpdate);
      addArtifact(u.artifact, u.append === true);
    } else if (e.message) {
      t.node.append(el("div", {}, partsView(obj(e.message).parts)));
    } else {
      t.node.append(el("pre", { class: "bad" }, "An event of unknown kind: " + pretty(ev)));
    }
  }
  const head = el("span", { class: "who" }, `agent · task ${short(id)} · `, el("span", { class: "state", "data-state": state }, state || "?"));
  const body = [head];
  if (statusMsg) body.push(el("div", { class: "status-text" }, partsView(obj(statusMsg).parts)));
  for (const k of order) {
    const a = artifacts.get(k);
    const name = a.name;
    body.push(el("div", { class: "artifact" }, el("h3", {}, name || "artifact"), partsView(a.parts, "", name)));
  }
  t.node.replaceChildren(...body);
  if (state === "input-required" || state === "auth-required") {
    $("chat-task").value = id;
    $("prompt").hidden = false;
    $("prompt").replaceChildren(el("strong", {}, state === "auth-required" ? "The agent needs authorization: " : "The agent asks for input: "),
      el("div", {}, statusMsg ? partsView(obj(statusMsg).parts) : ""), el("div", {}, "Your reply continues the same task."));
  } else if (state) {
    if ($("chat-task").value === id) { $("chat-task").value = ""; $("prompt").hidden = true; }
  }
  $("chat-context").value = contextId;
}

function eventTaskId(ev) {
  const e = obj(ev);
  return str(obj(e.task).id || obj(e.statusUpdate).taskId || obj(e.artifactUpdate).taskId || obj(e.message).taskId);
}

function addEvents(list) {
  const touched = new Set();
  for (const ev of arr(list)) {
    const id = eventTaskId(ev);
    if (!id) { $("chat-log").append(el("div", { class: "msg agent" }, partsView(obj(obj(ev).message).parts))); continue; }
    taskOf(id).events.push(ev);
    touched.add(id);
  }
  for (const id of touched) renderTask(id);
}

async function readFiles(input) {
  const out = [];
  for (const f of input.files) {
    const buf = new Uint8Array(await f.arrayBuffer());
    let bin = "";
    for (let i = 0; i < buf.length; i += 0x8000) bin += String.fromCharCode(...buf.subarray(i, i + 0x8000));
    out.push({ name: f.name, mediaType: f.type, base64: btoa(bin) });
  }
  return out;
}

let streaming = new Set(); // tasks whose events arrive live

$("chat-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const text = $("chat-text").value;
  let data;
  if ($("chat-data").value.trim()) {
    try { data = JSON.parse($("chat-data").value); } catch (e) { alert("The data part is not JSON: " + e.message); return; }
  }
  const files = await readFiles($("chat-files"));
  const body = { text, data, files, taskId: $("chat-task").value, contextId: $("chat-context").value, messageId: $("chat-msgid").value, stream: $("chat-stream").checked, push: $("chat-push").checked };
  $("chat-log").append(el("div", { class: "msg user" }, el("span", { class: "who" }, "you"), text, files.map((f) => el("span", { class: "chip" }, f.name)), data !== undefined ? el("pre", {}, pretty(data)) : null));
  $("chat-text").value = "";
  $("prompt").hidden = true;
  $("send").disabled = true;
  try {
    const res = await api("/api/send", { body });
    if (body.stream) {
      // The live events drew the task already; the full list makes sure.
      const byTask = new Map();
      for (const e of arr(res.events)) { const id = eventTaskId(e); if (id) { if (!byTask.has(id)) byTask.set(id, []); byTask.get(id).push(e); } }
      for (const [id, evs] of byTask) { taskOf(id).events = evs; renderTask(id); }
      for (const e of arr(res.events)) if (!eventTaskId(e)) addEvents([e]);
      if (res.error) $("chat-log").append(el("div", { class: "error" }, `Stream error: ${str(res.error.message)}`));
    } else {
      const r = obj(res.result);
      if (r.task) { const id = str(obj(r.task).id); taskOf(id).events.push({ task: r.task }); renderTask(id); }
      else if (r.message) $("chat-log").append(el("div", { class: "msg agent" }, el("span", { class: "who" }, "agent"), partsView(obj(r.message).parts)));
    }
  } catch (e) {
    $("chat-log").append(el("div", { class: "error" }, `Error: ${e.message}${e.hint ? "\nHint: " + e.hint : ""}`));
  } finally {
    $("send").disabled = false;
  }
});
$("chat-text").addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) { ev.preventDefault(); $("chat-form").requestSubmit(); }
});
$("new-context").addEventListener("click", () => { contextId = ""; $("chat-context").value = ""; $("chat-task").value = ""; $("prompt").hidden = true; });

// ----- timeline -----------------------------------------------------------
function refreshTimelineTasks() {
  const sel = $("timeline-task");
  const cur = sel.value;
  sel.replaceChildren(...[...tasks.keys()].map((id) => el("option", { value: id }, id)));
  if (cur && tasks.has(cur)) sel.value = cur;
  else if (tasks.size) sel.value = [...tasks.keys()].pop();
  loadTimeline();
}
async function loadTimeline() {
  const id = $("timeline-task").value;
  if (!id) { $("timeline").replaceChildren(el("li", {}, "No task yet: send a message first.")); return; }
  const tl = await api(`/api/timeline/${encodeURIComponent(id)}`);
  $("timeline").replaceChildren(...arr(tl.entries).map((e) => {
    e = obj(e);
    const ev = obj(e.event);
    const a = obj(obj(ev.artifactUpdate).artifact);
    const detail = e.kind === "artifact"
      ? `${str(a.name) || str(a.artifactId)}${obj(ev.artifactUpdate).append ? " (chunk appended)" : ""}${obj(ev.artifactUpdate).lastChunk ? " (last chunk)" : ""}`
      : stateName(e.state);
    return el("li", { class: e.final ? "final" : e.interrupted ? "interrupted" : "" }, el("time", {}, str(e.at)), ` +${Number(e.offsetMs) || 0} ms · ${str(e.kind)} · ${detail}`,
      e.final ? " · final" : e.interrupted ? " · waiting for the user" : "");
  }));
}
$("timeline-task").addEventListener("change", loadTimeline);

// ----- wire ---------------------------------------------------------------
const calls = [];
function copy(text) {
  if (navigator.clipboard) navigator.clipboard.writeText(text).catch(() => {});
}
function bodyView(b, what) {
  b = obj(b);
  if (b.text === undefined) return el("p", { class: "muted" }, `(no ${what})`);
  const mark = b.truncated ? el("p", { class: "warn" }, `truncated: the first ${str(b.text).length} characters of ${Number(b.length) || 0} bytes`) : null;
  return [el("pre", { class: "raw" }, str(b.text)), mark];
}
const headerText = (hs) => arr(hs).map((h) => `${str(arr(h)[0])}: ${str(arr(h)[1])}`).join("\n");
// An SSE frame as it was on the wire: its id, event type and data lines.
function frameText(f) {
  f = obj(f);
  const lines = [];
  if (f.id !== undefined && f.id !== null) lines.push(`id: ${str(f.id)}`);
  if (f.event && f.event !== "message") lines.push(`event: ${str(f.event)}`);
  for (const l of str(obj(f.data).text).split("\n")) lines.push(`data: ${l}`);
  return lines.join("\n");
}
function exchangeView(x, n, total) {
  x = obj(x);
  const grpc = x.binding === "GRPC";
  const end = obj(x.end);
  const frames = arr(x.frames);
  return el("section", { class: "exchange" },
    total > 1 ? el("h4", {}, `Exchange ${n + 1} of ${total}`) : null,
    el("h4", {}, grpc ? "Request (gRPC)" : "Request"),
    el("pre", { class: "reqline" }, `${str(x.method)} ${str(x.url)}`),
    el("h5", {}, grpc ? "Metadata" : "Headers"), el("pre", { class: "headers" }, headerText(x.requestHeaders)),
    el("h5", {}, grpc ? "Message (decoded to JSON)" : "Body, exactly as sent"), bodyView(x.requestBody, "body"),
    el("h4", {}, "Response"),
    x.status !== null && x.status !== undefined ? el("pre", { class: "status" }, `HTTP ${x.status}`) : null,
    arr(x.responseHeaders).length ? [el("h5", {}, grpc ? "Metadata" : "Headers"), el("pre", { class: "headers" }, headerText(x.responseHeaders))] : null,
    x.responseBody ? [el("h5", {}, grpc ? "Message (decoded to JSON)" : "Body, exactly as received"), bodyView(x.responseBody, "body")] : null,
    frames.length || x.streamed ? [el("h5", {}, `${grpc ? "Stream messages (decoded to JSON)" : "Stream frames, as received"} (${Number(end.frames) || frames.length})`),
      el("pre", { class: "frames" }, frames.map((f) => `+${Number(obj(f).offsetMs) || 0} ms\n${frameText(f)}`).join("\n\n")),
      end.framesDropped ? el("p", { class: "warn" }, `${end.framesDropped} more frames not kept`) : null] : null,
    end.error ? el("p", { class: "bad" }, `Ended: ${str(end.error)}`) : x.end ? null : el("p", { class: "muted" }, "still open"));
}
function renderWire() {
  $("wire").replaceChildren(...calls.map((c) => {
    c = obj(c);
    const w = obj(c.wire);
    const xs = arr(c.exchanges);
    return el("li", { class: "call" }, el("details", {},
      el("summary", {}, `${str(c.op)} · ${str(c.binding)} · ${str(w.method)} ${str(w.target)}${w.status ? " · " + w.status : ""} · ${Number(c.durationMs) || 0} ms${c.error ? " · error" : ""}`),
      xs.length ? xs.map((x, i) => exchangeView(x, i, xs.length)) : el("p", {}, "Nothing was sent (the call failed before it reached the agent)."),
      el("h4", {}, c.error ? "Error" : "Result (decoded)"), el("pre", {}, c.error ? str(c.error) : clipped(c.response)),
      c.curl ? [el("button", { type: "button", onclick: () => copy(str(c.curl)) }, "Copy as curl"), el("pre", { class: "curl" }, str(c.curl))] : null,
      c.grpcurl ? [el("button", { type: "button", onclick: () => copy(str(c.grpcurl)) }, "Copy as grpcurl"), el("pre", { class: "curl" }, str(c.grpcurl))] : null,
      c.a2a ? [el("button", { type: "button", onclick: () => copy(str(c.a2a)) }, "Copy as a2a command"), el("pre", {}, str(c.a2a))] : null));
  }));
}

// ----- tasks --------------------------------------------------------------
let nextToken = "";
async function listTasks(token = "") {
  const q = new URLSearchParams();
  if ($("tasks-context").value) q.set("contextId", $("tasks-context").value);
  if ($("tasks-status").value) q.set("status", $("tasks-status").value);
  if ($("tasks-size").value) q.set("pageSize", $("tasks-size").value);
  if (token) q.set("pageToken", token);
  try {
    const r = await api(`/api/tasks?${q}`);
    nextToken = str(r.nextPageToken);
    $("tasks-next").disabled = !nextToken;
    $("tasks").tBodies[0].replaceChildren(...arr(r.tasks).map((t) => {
      t = obj(t);
      const id = str(t.id);
      return el("tr", {}, el("td", {}, el("code", {}, id)), el("td", {}, el("code", {}, str(t.contextId))), el("td", {}, stateName(obj(t.status).state)),
        el("td", {}, el("button", { type: "button", onclick: () => { $("task-id").value = id; taskCall("get"); } }, "Get"),
          el("button", { type: "button", onclick: () => { $("task-id").value = id; taskCall("cancel"); } }, "Cancel")));
    }));
  } catch (e) { $("task-out").textContent = `Error: ${e.message}`; }
}
$("tasks-form").addEventListener("submit", (ev) => { ev.preventDefault(); listTasks(); });
$("tasks-next").addEventListener("click", () => listTasks(nextToken));
async function taskCall(what) {
  const id = $("task-id").value.trim();
  if (!id) { $("task-out").textContent = "Give a task id."; return; }
  const p = `/api/tasks/${encodeURIComponent(id)}`;
  $("task-out").textContent = "…";
  try {
    let r;
    if (what === "get") r = await api(`${p}${$("task-history").value ? "?historyLength=" + encodeURIComponent($("task-history").value) : ""}`);
    if (what === "cancel") r = await api(`${p}/cancel`, { body: {} });
    if (what === "subscribe") r = await api(`${p}/subscribe`, { body: {} });
    if (what === "push") r = await api(`${p}/push-configs`);
    $("task-out").textContent = pretty(r);
    if (what === "cancel") { taskOf(id).events.push({ task: r }); renderTask(id); }
  } catch (e) { $("task-out").textContent = `Error: ${e.message}${e.hint ? "\nHint: " + e.hint : ""}`; }
}
$("task-form").addEventListener("submit", (ev) => { ev.preventDefault(); taskCall("get"); });
$("task-cancel").addEventListener("click", () => taskCall("cancel"));
$("task-subscribe").addEventListener("click", () => taskCall("subscribe"));
$("task-push").addEventListener("click", () => taskCall("push"));

// ----- versions -----------------------------------------------------------
async function loadVersions() {
  const r = await api("/api/versions");
  $("versions").replaceChildren(...arr(r.contexts).map((c) => {
    c = obj(c);
    return el("section", {}, el("h3", {}, `Context ${str(c.contextId)}`), el("ol", {}, arr(c.versions).map((v) => {
      v = obj(v);
      const input = el("input", { "aria-label": "How to refine it", placeholder: "How to refine it" });
      return el("li", { "data-artifact": str(v.artifactId) },
        el("strong", {}, str(v.name)), ` ${short(str(v.artifactId))}`, v.previous ? ` refines ${short(str(v.previous))}` : "",
        v.accepted ? el("span", { class: "ok accepted" }, " · accepted") : "",
        " ", el("button", { type: "button", class: "accept", onclick: async () => { await api(`/api/versions/${encodeURIComponent(str(v.artifactId))}/accept`, { body: {} }); loadVersions(); } }, "Accept"),
        " ", input, el("button", { type: "button", class: "refine", onclick: async () => {
          try {
            const res = await api(`/api/versions/${encodeURIComponent(str(v.artifactId))}/refine`, { body: { text: input.value } });
            const t = obj(obj(res.result).task);
            if (t.id) { taskOf(str(t.id)).events.push({ task: t }); renderTask(str(t.id)); }
          } catch (e) { alert(e.message); }
          loadVersions();
        } }, "Refine"),
        el("details", {}, el("summary", {}, "Content"), partsView(obj(v.artifact).parts, "", str(v.name))));
    })));
  }));
  if (!arr(r.contexts).length) $("versions").replaceChildren(el("p", {}, "No artifact yet."));
}
$("versions-refresh").addEventListener("click", loadVersions);

// ----- webhook ------------------------------------------------------------
const deliveries = [];
function renderDeliveries() {
  $("deliveries").replaceChildren(...deliveries.map((d) => {
    d = obj(d);
    const ev = obj(d.event);
    const state = stateName(obj(obj(ev.statusUpdate).status).state || obj(obj(ev.task).status).state);
    return el("li", {}, el("time", {}, str(d.at)), ` task ${str(d.taskId)} · ${state || Object.keys(ev).join(",")} · signature: `, el("span", { class: d.signedBy ? "ok" : "warn" }, str(d.signature)),
      el("details", {}, el("summary", {}, "Event"), el("pre", {}, pretty(ev))));
  }));
}
async function loadDeliveries() {
  const r = await api("/api/webhook");
  if (r.url) $("webhook-url").textContent = `Receiving at ${str(r.url)}`;
  deliveries.length = 0;
  deliveries.push(...arr(r.deliveries));
  renderDeliveries();
}
$("webhook-start").addEventListener("click", async () => {
  const r = await api("/api/webhook", { body: {} });
  $("webhook-url").textContent = `Receiving at ${str(r.url)}`;
});

// ----- live updates ---------------------------------------------------------
const live = new EventSource("/api/events");
live.addEventListener("message", (m) => {
  let msg;
  try { msg = JSON.parse(m.data); } catch { return; }
  const d = msg.data;
  if (msg.kind === "event") {
    const id = str(obj(d).taskId);
    const ev = obj(obj(d).entry).event;
    if (id) {
      // Already there when the call's answer came first: not twice.
      const t = taskOf(id), seen = JSON.stringify(ev);
      if (!t.events.some((e) => JSON.stringify(e) === seen)) { t.events.push(ev); renderTask(id); }
    }
    if (!$("view-timeline").hidden) refreshTimelineTasks();
  } else if (msg.kind === "wire") {
    calls.push(d);
    if (!$("view-wire").hidden) renderWire();
  } else if (msg.kind === "delivery") {
    deliveries.push(d);
    renderDeliveries();
  } else if (msg.kind === "connected") {
    renderCard(obj(d));
  }
});

// ----- start ----------------------------------------------------------------
(async () => {
  select(tabs[0]);
  try {
    const s = await api("/api/session");
    if (s.initialAgent) $("agent").value = str(s.initialAgent);
    if (s.connected && s.connected.card) renderCard(s.connected);
    const w = await api("/api/wire");
    calls.push(...arr(w.calls));
  } catch (e) { showError($("connect-error"), e); }
  document.body.dataset.ready = "true";
})();
