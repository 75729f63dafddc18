// The Suanpan web console: every number comes from the hub's REST API, called with the token
// the user signs in with: an API token, or the OIDC provider's JWT got by the authorization-code
// flow with PKCE (kept in sessionStorage: gone with the tab; nothing in local storage). The page
// is built with DOM nodes and textContent only, so names, labels and reasons are shown as text.
"use strict";

const TOKEN_KEY = "suanpan-token";
const LOGIN_KEY = "suanpan-oidc-login";  // state, nonce and PKCE verifier of a sign-in under way
const REFRESH_MS = 5000;
let who = null;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "on") { for (const [ev, fn] of Object.entries(value)) { node.addEventListener(ev, fn); } }
    else if (value !== undefined && value !== null && value !== false) { node.setAttribute(key, value === true ? "" : value); }
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined) { continue; }
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function table(headers, rows, attrs) {
  return el("table", attrs,
    el("thead", {}, el("tr", {}, headers.map(h => el("th", { class: h.num ? "num" : null }, h.text ?? h)))),
    el("tbody", {}, rows));
}

function num(value, attrs) { return el("td", { class: "num", ...attrs }, value); }

function bar(used, total) {
  const pct = total ? Math.round(100 * used / total) : 0;
  return el("span", {}, el("span", { class: "bar" + (pct > 100 ? " over" : "") },
    el("span", { style: `width:${Math.min(pct, 100)}%` })), ` ${pct}%`);
}

function devices(milli) { return String(Math.round(milli) / 1000); }

function ago(iso) {
  if (!iso) { return "-"; }
  const s = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
  return s < 120 ? `${s}s ago` : s < 7200 ? `${Math.round(s / 60)}m ago` : `${Math.round(s / 3600)}h ago`;
}

function showError(message) {
  const box = document.getElementById("error");
  box.textContent = message || "";
  box.hidden = !message;
}

async function api(path, method = "GET") {
  const response = await fetch(path, {
    method, headers: { Authorization: "Bearer " + sessionStorage.getItem(TOKEN_KEY) } });
  const body = response.status === 204 ? null : await response.json();
  if (response.status === 401 && who) { signedOut(); }  // expired or revoked: sign in again
  if (!response.ok) { throw new Error(`${response.status} ${body.title}: ${body.detail}`); }
  return body;
}

// An action through the same API as the CLI; the hub's refusal is shown as it is.
async function act(path, label, method) {
  try { await api(path, method); showError(""); }
  catch (e) { showError(`${label}: ${e.message}`); return; }
  await render();
}

function actionButton(label, path, roles, method = "POST") {
  if (!who || !roles.includes(who.role)) { return null; }
  return el("button", { type: "button", class: "action", "data-action": label,
    on: { click: () => act(path, label, method) } }, label);
}

// ---- Fleet ----------------------------------------------------------------------------

function lost(cluster) { return cluster.state === "Offline" || cluster.state === "NotReady"; }

function rollup(clusters, keyOf) {
  const out = new Map();
  for (const c of clusters) {
    for (const f of c.flavors) {
      const key = keyOf(c, f);
      const acc = out.get(key) || { total: 0, healthy: 0, allocatedMilli: 0, freeWhole: 0, reporting: 0, busy: 0 };
      acc.total += f.total; acc.healthy += f.healthy; acc.allocatedMilli += f.allocatedMilli; acc.freeWhole += f.freeWhole;
      acc.reporting += f.reporting || 0; acc.busy += (f.utilization || 0) * (f.reporting || 0);
      out.set(key, acc);
    }
  }
  return [...out.entries()].sort((a, b) => a[0].localeCompare(b[0]));
}

// Live utilization as the agents read it from the vendors' exporters ("-": none reported).
function utilization(percent, reporting, total, tag = "td") {
  return el(tag, { class: tag === "td" ? "num" : "muted", "data-field": "utilization",
    title: reporting ? `live: ${reporting} of ${total} devices report` : "no exporter read" },
  reporting ? `${Math.round(percent)}%` : "-");
}

function rollupTable(id, title, entries) {
  return table([title, { text: "Devices", num: true }, { text: "Unhealthy", num: true },
    { text: "Allocated", num: true }, { text: "In use (whole or shared)", num: true }, "Allocation",
    { text: "Live utilization", num: true }],
  entries.map(([key, a]) => el("tr", { "data-key": key }, el("td", {}, key), num(a.total),
    num(a.total - a.healthy), num(devices(a.allocatedMilli)), num(a.healthy - a.freeWhole),
    el("td", {}, bar(a.allocatedMilli / 1000, a.healthy)),
    utilization(a.reporting ? a.busy / a.reporting : 0, a.reporting, a.total))), { id });
}

const SVG = "http://www.w3.org/2000/svg";
const COLORS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777", "#4b5563"];

function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) { node.setAttribute(key, value); }
  node.append(...children);
  return node;
}

// Share of healthy devices allocated, per vendor/model across the fleet, over time.
function historyChart(history) {
  const byFlavor = new Map();
  for (const s of history.items) {
    const points = byFlavor.get(s.flavor) || new Map();
    const p = points.get(s.takenAt) || { healthy: 0, allocatedMilli: 0 };
    p.healthy += s.healthy; p.allocatedMilli += s.allocatedMilli;
    points.set(s.takenAt, p);
    byFlavor.set(s.flavor, points);
  }
  const times = history.items.map(s => Date.parse(s.takenAt));
  const [t0, t1] = [Math.min(...times), Math.max(...times)];
  const W = 1000, H = 160, x = t => 40 + (t1 > t0 ? (t - t0) / (t1 - t0) : 1) * (W - 50), y = v => 10 + (1 - v) * H;
  const chart = svg("svg", { id: "history", viewBox: `0 0 ${W} ${H + 30}`, width: "100%",
    "data-samples": String(history.items.length) },
  ...[0, 0.5, 1].map(v => svg("text", { x: 0, y: y(v) + 4, "font-size": 11, fill: "#5a6372" }, `${v * 100}%`)),
  svg("line", { x1: 40, x2: W - 10, y1: y(0), y2: y(0), stroke: "#dde1e7" }),
  svg("text", { x: 40, y: H + 28, "font-size": 11, fill: "#5a6372" }, times.length ? new Date(t0).toLocaleTimeString() : ""),
  svg("text", { x: W - 10, y: H + 28, "font-size": 11, fill: "#5a6372", "text-anchor": "end" },
    times.length ? new Date(t1).toLocaleTimeString() : ""));
  const legend = [];
  [...byFlavor.keys()].sort().forEach((flavor, i) => {
    const color = COLORS[i % COLORS.length];
    const points = [...byFlavor.get(flavor).entries()].map(([t, p]) =>
      `${x(Date.parse(t)).toFixed(1)},${y(p.healthy ? p.allocatedMilli / 1000 / p.healthy : 0).toFixed(1)}`);
    chart.append(svg("polyline", { points: points.join(" "), fill: "none", stroke: color, "stroke-width": 2,
      "data-flavor": flavor }));
    legend.push(el("span", { class: "legend", style: `border-color:${color}` }, flavor));
  });
  return [history.items.length ? chart : el("p", { class: "muted" }, "no samples yet"),
    el("p", { class: "muted" }, legend, ` sampled every ${history.intervalSeconds} s, kept ${history.keepSeconds / 3600} h`)];
}

async function fleetPage() {
  const [clusters, history] = await Promise.all([
    api("/v1/clusters").then(b => b.items), api("/v1/allocation-history?seconds=3600")]);
  const rows = [];
  for (const c of clusters) {
    const marks = [
      c.accepted ? null : el("span", { class: "badge cordoned" }, "awaiting acceptance"),
      c.cordoned ? el("span", { class: "badge cordoned" }, "cordoned") : null,
      c.draining ? el("span", { class: "badge draining" }, "draining") : null,
      lost(c) ? el("span", { class: "badge lost" }, "lost") : null,
      c.apiserverProblem ? el("span", { class: "badge lost", title: c.apiserverProblem }, "apiserver unreachable") : null];
    const actions = el("td", {},
      c.cordoned ? actionButton("Uncordon", `/v1/clusters/${c.name}/uncordon`, ["admin"])
        : actionButton("Cordon", `/v1/clusters/${c.name}/cordon`, ["admin"]),
      c.draining ? null : actionButton("Drain", `/v1/clusters/${c.name}/drain`, ["admin"]));
    const flavors = c.flavors.length ? c.flavors : [null];
    flavors.forEach((f, i) => rows.push(el("tr", { "data-cluster": c.name, "data-flavor": f ? f.flavor : "" },
      el("td", {}, i ? "" : el("b", {}, c.name), i ? null : marks),
      el("td", {}, i ? "" : c.region),
      el("td", { class: "state " + c.state }, i ? "" : c.state),
      el("td", { class: "muted" }, i ? "" : `${c.readyNodes}/${c.nodes} nodes · ${ago(c.lastHeartbeat)}`),
      el("td", {}, f ? f.flavor : "no accelerators"),
      num(f ? f.total : "", { "data-field": "total" }),
      num(f ? f.total - f.healthy : "", { "data-field": "unhealthy" }),
      num(f ? devices(f.allocatedMilli) : "", { "data-field": "allocated" }),
      num(f ? f.healthy - f.freeWhole : "", { "data-field": "inUse" }),
      el("td", {}, f ? [bar(f.allocatedMilli / 1000, f.healthy), " · ",
        utilization(f.utilization || 0, f.reporting, f.total, "span")] : ""),
      i ? el("td", {}) : actions)));
  }
  return [
    el("section", {}, el("h2", {}, "Accelerators by vendor and model"),
      rollupTable("by-flavor", "Vendor/model", rollup(clusters, (c, f) => f.flavor))),
    el("section", {}, el("h2", {}, "Allocation over the last hour (share of healthy devices)"),
      historyChart(history)),
    el("section", {}, el("h2", {}, "By region"),
      rollupTable("by-region", "Region", rollup(clusters, c => c.region || "(none)"))),
    el("section", {}, el("h2", {}, "Clusters"),
      table(["Cluster", "Region", "State", "Nodes", "Vendor/model", { text: "Devices", num: true },
        { text: "Unhealthy", num: true }, { text: "Allocated", num: true },
        { text: "In use", num: true }, "Allocation · live", "Actions"], rows, { id: "clusters" })),
  ];
}

// ---- Queues ---------------------------------------------------------------------------

function ordinal(n) { return n + (["th", "st", "nd", "rd"][n % 100 > 10 && n % 100 < 14 ? 0 : n % 10] || "th"); }

async function queuesPage() {
  const queues = (await api("/v1/queues")).items;
  const waiting = await Promise.all(queues.map(q =>
    api(`/v1/tenants/${q.tenant}/queues/${q.name}/waiting?limit=20`)));
  return queues.map((q, i) => {
    const quota = Object.entries(q.quota).map(([res, limit]) => {
      const used = q.usage[res] || 0;
      return el("tr", { "data-resource": res }, el("td", {}, res), num(used, { "data-field": "usage" }),
        num(limit.nominal, { "data-field": "nominal" }),
        num(limit.borrowingLimit ?? "no cap", { "data-field": "borrowingLimit" }),
        num(Math.max(0, used - limit.nominal), { "data-field": "borrowed" }),
        el("td", {}, bar(used, limit.nominal)));
    });
    const counts = Object.entries(q.jobs).map(([state, n]) => `${state} ${n}`).join(" · ") || "no jobs";
    const peers = queues.filter(p => q.cohort && p.cohort === q.cohort).sort((a, b) => a.fairShare - b.fairShare);
    const standing = peers.length > 1
      ? ` · ${ordinal(peers.indexOf(q) + 1)} of ${peers.length} queues of cohort ${q.cohort} it sees` : "";
    const wait = waiting[i].items.map(w => el("tr", { "data-job": w.id },
      num(w.position, { "data-field": "position" }),
      el("td", {}, el("a", { href: `#/jobs/${w.id}` }, w.name)),
      el("td", {}, w.priorityClass), el("td", {}, ago(w.createdAt)), el("td", {}, w.reason)));
    return el("section", { "data-queue": `${q.tenant}/${q.name}` },
      el("h2", {}, `${q.tenant} / ${q.name}`),
      el("p", { class: "muted" }, `cohort ${q.cohort || "none"} · weight ${q.weight} · ${counts}`),
      el("p", {}, "Fair share ", el("b", { "data-field": "fairShare" }, `${(100 * q.fairShare).toFixed(1)}%`),
        el("span", { class: "muted", "data-field": "standing" },
          ` (largest share of a resource of its cohort, per weight; among equal priorities the`
          + ` lowest is served first)${standing}`)),
      quota.length ? table(["Resource", { text: "Used", num: true }, { text: "Nominal", num: true },
        { text: "Borrowing limit", num: true }, { text: "Borrowed", num: true }, "Use of nominal"], quota,
      { class: "quota" }) : el("p", { class: "muted" }, "no quota set"),
      el("h3", {}, "Waiting, in the order the scheduler takes them"),
      wait.length ? table([{ text: "#", num: true }, "Job", "Priority", "Waiting since", "Why it waits"], wait,
        { class: "waiting" }) : el("p", { class: "muted" }, "no job waits"));
  });
}

// ---- Jobs -----------------------------------------------------------------------------

const STATES = ["Queued", "Placed", "Dispatched", "Running", "Preempting", "Succeeded", "Failed", "Cancelled"];
const FILTERS = ["state", "tenant", "queue", "label", "vendor", "cluster"];

function jobVendors(job) {
  const out = new Set();
  for (const t of job.spec.spec?.tasks || []) {
    for (const option of t.resources?.accelerators?.anyOf || []) { out.add(option.flavor.split("/")[0]); }
  }
  return out;
}

function filtersForm(params) {
  const field = name => name === "state"
    ? el("select", { name }, el("option", { value: "" }, "all states"),
      STATES.map(s => el("option", { value: s, selected: params.get(name) === s }, s)))
    : el("input", { name, placeholder: name === "label" ? "label k=v" : name, value: params.get(name) || "" });
  return el("form", { class: "filters", id: "job-filters", on: { submit: ev => {
    ev.preventDefault();
    const q = new URLSearchParams();
    for (const name of FILTERS) { const v = ev.target.elements[name].value.trim(); if (v) { q.set(name, v); } }
    location.hash = "#/jobs" + (q.toString() ? "?" + q : "");
  } } }, FILTERS.map(field), el("button", { type: "submit" }, "Filter"));
}

const JOB_PAGE = 100;

function jobRow(j) {
  return el("tr", { "data-job": j.id },
    el("td", {}, el("a", { href: `#/jobs/${j.id}` }, j.name)), el("td", {}, j.tenant), el("td", {}, j.queue),
    el("td", {}, j.priorityClass), el("td", { class: "state " + j.state }, j.state),
    el("td", {}, j.cluster || "-"), el("td", {}, [...jobVendors(j)].join(", ")),
    el("td", {}, ago(j.createdAt)), el("td", {}, j.reason));
}

// The hub filters (every filter is a query parameter of GET /v1/jobs) and pages with its cursor,
// kept in the route so that the page's refresh stays on the same page.
async function jobsPage(params) {
  const query = new URLSearchParams({ limit: String(JOB_PAGE) });
  for (const name of [...FILTERS, "cursor", "limit"]) { if (params.get(name)) { query.set(name, params.get(name)); } }
  const page = await api("/v1/jobs?" + query);
  const link = cursor => {
    const q = new URLSearchParams(params);
    if (cursor) { q.set("cursor", cursor); } else { q.delete("cursor"); }
    return "#/jobs" + (q.toString() ? "?" + q : "");
  };
  const paging = el("p", { class: "paging" },
    params.get("cursor") ? el("a", { href: link(null), id: "first-jobs" }, "newest") : null, " ",
    page.nextCursor ? el("a", { href: link(page.nextCursor), id: "more-jobs" }, "older") : null);
  const where = params.get("cursor") ? "older " : "";
  return [el("section", {}, el("h2", {}, `Jobs (${where}${page.items.length}${page.nextCursor ? "+" : ""})`),
    filtersForm(params),
    table(["Name", "Tenant", "Queue", "Priority", "State", "Cluster", "Vendors", "Submitted", "Reason"],
      page.items.map(jobRow), { id: "jobs" }), paging)];
}

// Where each replica runs: the hub's plan (node, devices) from its latest placement.
function placementSection(job, placed) {
  const planned = placed?.data.replicas || [];
  const rows = planned.map(r => el("tr", { "data-replica": `${r.task}/${r.replica}` },
    el("td", {}, r.task), num(r.replica),
    el("td", {}, placed.data.flavors?.[r.task] || "CPU"), el("td", { "data-field": "node" }, r.node || "-"),
    el("td", { "data-field": "devices" }, r.devices.length ? r.devices.join(", ") : "-")));
  const headers = ["Task", { text: "Replica", num: true }, "Vendor/model", "Node", "Devices"];
  return el("section", { id: "placement" }, el("h2", {}, "Placement"),
    placed ? el("p", { class: "muted" }, `cluster ${placed.data.cluster} · epoch ${job.epoch} · the hub's plan per`
      + " replica (the cluster's scheduler binds the pods)") : null,
    rows.length ? table(headers, rows)
      : el("p", { class: "muted" }, job.cluster ? "no replica plan recorded" : "not placed"));
}

// What each replica's pod did, as its cluster last reported it: the latest attempt, and the
// failure of the attempt it replaced on a line of its own.
function replicasSection(job) {
  const code = c => (c === null || c === undefined ? "-" : String(c));
  const rows = job.replicas.flatMap(r => [
    el("tr", { "data-replica": `${r.task}/${r.replica}`, class: r.phase === "Failed" ? "failed" : null },
      el("td", {}, r.task), num(r.replica), num(r.attempt), el("td", {}, r.pod), el("td", { "data-field": "node" }, r.node || "-"),
      el("td", { "data-field": "phase" }, r.phase), num(code(r.exitCode), { "data-field": "exit" }),
      el("td", { "data-field": "reason", title: r.message }, r.reason || "-"), num(r.restarts)),
    r.lastFailure ? el("tr", { "data-replica": `${r.task}/${r.replica}/${r.lastFailure.attempt}`, class: "muted" },
      el("td", {}, ""), el("td", {}, ""), num(r.lastFailure.attempt), el("td", {}, r.lastFailure.pod),
      el("td", {}, r.lastFailure.node || "-"), el("td", {}, "Failed"), num(code(r.lastFailure.exitCode)),
      el("td", { title: r.lastFailure.message }, r.lastFailure.reason || "-"), el("td", {}, "")) : null,
  ]).filter(Boolean);
  const headers = ["Task", { text: "Replica", num: true }, { text: "Attempt", num: true }, "Pod", "Node", "Phase",
    { text: "Exit code", num: true }, "Reason", { text: "Restarts", num: true }];
  return el("section", { id: "replicas" }, el("h2", {}, "Replicas"),
    el("p", { class: "muted" }, `${job.attempts} attempt${job.attempts === 1 ? "" : "s"} · as the cluster last reported`),
    rows.length ? table(headers, rows) : el("p", { class: "muted" }, "no replica reported yet"));
}

function eventsSection(items) {
  return el("section", {}, el("h2", {}, "Events"), table(["When", "Reason", "Message"], items.map(e =>
    el("tr", { "data-event": e.id }, el("td", {}, e.createdAt), el("td", {}, e.reason), el("td", {}, e.message))),
  { id: "events" }));
}

function facts(pairs) {
  return el("dl", { class: "facts" }, pairs.map(([k, v]) => [el("dt", {}, k), el("dd", { "data-field": k }, v)]));
}

async function jobPage(id) {
  const [job, events, why] = await Promise.all([
    api(`/v1/jobs/${id}`), api(`/v1/jobs/${id}/events?limit=1000`), api(`/v1/jobs/${id}/explain`)]);
  const finished = ["Succeeded", "Failed", "Cancelled"].includes(job.state);
  const preemptions = events.items.filter(e => e.reason === "Preempted" || e.reason === "Preempting")
    .map(e => el("tr", {}, el("td", {}, e.createdAt),
      el("td", {}, e.reason === "Preempted" ? "evicted by" : "evicted"),
      el("td", {}, (e.reason === "Preempted" ? [e.data.preemptor] : e.data.victims || [])
        .map(v => el("a", { href: `#/jobs/${v}` }, String(v).slice(0, 8) + " "))),
      el("td", {}, e.data.cluster || ""), el("td", {}, e.message)));
  const placed = job.cluster ? events.items.filter(e => e.reason === "Placed").at(-1) : null;
  const flavors = placed ? Object.entries(placed.data.flavors || {})
    .map(([t, f]) => `${t} on ${f || "CPU"}`).join(", ") : "-";
  const labels = Object.entries(job.labels).map(([k, v]) => `${k}=${v}`).join(", ");
  const annotations = (job.spec.spec?.tasks || []).flatMap(t =>
    Object.entries(t.annotations || {}).map(([k, v]) => `${t.name}: ${k}=${v}`));
  return [
    el("section", {}, el("h2", { id: "job-name" }, job.name),
      el("p", {}, el("span", { class: "state " + job.state, id: "job-state" }, job.state), " — ", job.reason),
      el("div", {}, finished ? null : actionButton("Cancel", `/v1/jobs/${job.id}/cancel`, ["admin", "member"])),
      facts([["id", job.id], ["tenant", job.tenant], ["queue", job.queue],
        ["priority", `${job.priorityClass} (${job.priority})${job.preemptible ? ", preemptible" : ""}`],
        ["cluster", job.cluster || "-"], ["placement", flavors], ["epoch", job.epoch], ["attempts", job.attempts],
        ["elastic", (job.elastic || []).map(e => `${e.task}: ${e.replicas ?? "-"} held of ${e.minReplicas}..${e.maxReplicas}`)
          .join(", ") || "-"],
        ["labels", labels || "-"],
        ["annotations", annotations.join("; ") || "-"],
        ["submitted", job.createdAt], ["started", job.startedAt || "-"], ["finished", job.finishedAt || "-"]])),
    placementSection(job, placed),
    replicasSection(job),
    el("section", { id: "explain" }, el("h2", {}, "Explain"), el("p", { id: "explain-summary" }, why.summary),
      why.clusters.length ? table(["Cluster", "Code", "Why not"], why.clusters.map(c =>
        el("tr", { "data-cluster": c.cluster }, el("td", {}, c.cluster), el("td", {}, c.code), el("td", {}, c.reason))))
        : el("p", { class: "muted" }, "no per-cluster reasons")),
    el("section", { id: "preemptions" }, el("h2", {}, "Preemptions"), preemptions.length
      ? table(["When", "", "Jobs", "Cluster", "Message"], preemptions) : el("p", { class: "muted" }, "none")),
    eventsSection(events.items),
    logsSection(job),
    el("section", {}, el("h2", {}, "Manifest"), el("pre", { id: "manifest" }, JSON.stringify(job.spec, null, 2))),
  ];
}

// ---- Logs of a job's replicas ----------------------------------------------------------
// The log panel outlives the page's refreshes: what was read (and a follow in progress) stays
// in `logView` and is redrawn into each new page; leaving the job stops the stream.

let logView = null;  // { job, query, text, note, controller }

function logTarget() { return document.getElementById("logs"); }

function drawLog() {
  const pre = logTarget();
  if (!pre || !logView) { return; }
  pre.textContent = logView.text;
  document.getElementById("logs-note").textContent = logView.note;
  pre.scrollTop = pre.scrollHeight;
}

function stopLog() {
  if (logView?.controller) { logView.controller.abort(); logView.controller = null; }
}

async function readLog(job, query) {
  stopLog();
  const controller = new AbortController();
  logView = { job, query, text: "", note: query.get("follow") ? "following…" : "reading…", controller };
  drawLog();
  const view = logView;
  try {
    const response = await fetch(`/v1/jobs/${job}/logs?${query}`, { signal: controller.signal,
      headers: { Authorization: "Bearer " + sessionStorage.getItem(TOKEN_KEY) } });
    if (!response.ok) {
      const problem = await response.json();
      view.note = `${response.status} ${problem.title}: ${problem.detail}`;
    } else {
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) { break; }
        view.text += value;
        if (view === logView) { drawLog(); }
      }
      view.note = `${view.text.length ? "" : "empty log · "}end of log`;
    }
  } catch (e) {
    view.note = e.name === "AbortError" ? "stopped" : e.message;
  }
  view.controller = null;
  if (view === logView) { drawLog(); }
}

function logsSection(job) {
  const tasks = (job.spec.spec?.tasks || []).map(t => ({ name: t.name, replicas: t.replicas ?? 1 }));
  if (logView && logView.job !== job.id) { stopLog(); logView = null; }
  const q = logView?.query || new URLSearchParams({ task: tasks[0]?.name || "", replica: "0", tail: "200" });
  const replicas = select => {
    const task = tasks.find(t => t.name === select.value) || tasks[0];
    const form = select.form;
    form.elements.replica.replaceChildren(...Array.from({ length: task?.replicas || 1 },
      (_, i) => el("option", { value: i, selected: String(i) === q.get("replica") }, i)));
  };
  const taskSelect = el("select", { name: "task", on: { change: ev => replicas(ev.target) } },
    tasks.map(t => el("option", { value: t.name, selected: t.name === q.get("task") }, t.name)));
  const form = el("form", { class: "filters", id: "log-form", on: { submit: ev => {
    ev.preventDefault();
    const f = ev.target.elements;
    const query = new URLSearchParams({ task: f.task.value, replica: f.replica.value });
    if (f.container.value.trim()) { query.set("container", f.container.value.trim()); }
    if (f.tail.value.trim()) { query.set("tail", f.tail.value.trim()); }
    if (f.follow.checked) { query.set("follow", "true"); }
    readLog(job.id, query);
  } } },
  el("label", {}, "task ", taskSelect), el("label", {}, "replica ", el("select", { name: "replica" })),
  el("input", { name: "container", placeholder: "container (default: first)", value: q.get("container") || "" }),
  el("label", {}, "last ", el("input", { name: "tail", type: "number", min: 0, class: "short",
    value: q.get("tail") || "" }), " lines"),
  el("label", {}, el("input", { name: "follow", type: "checkbox", checked: q.get("follow") === "true" }), " follow"),
  el("button", { type: "submit", "data-log": "show" }, "Show log"),
  el("button", { type: "button", on: { click: stopLog } }, "Stop"));
  replicas(taskSelect);
  const section = el("section", { id: "logs-section" }, el("h2", {}, "Logs"), form,
    el("p", { class: "muted", id: "logs-note" }, logView?.note ?? ""),
    el("pre", { id: "logs", class: "log" }, logView?.text ?? ""));
  return section;
}

// ---- Services ---------------------------------------------------------------------------

async function servicesPage() {
  const services = (await api("/v1/services?limit=500")).items;
  const rows = services.map(v => el("tr", { "data-service": v.name },
    el("td", {}, el("a", { href: `#/services/${v.id}` }, v.name)), el("td", {}, v.tenant), el("td", {}, v.queue),
    el("td", {}, v.priorityClass), num(v.desired, { "data-field": "desired" }), num(v.generation)));
  return [el("section", {}, el("h2", {}, "Services"), rows.length
    ? table(["Service", "Tenant", "Queue", "Priority", { text: "Desired", num: true },
      { text: "Generation", num: true }], rows, { id: "services" })
    : el("p", { class: "muted" }, "no services"))];
}

async function servicePage(id) {
  const [service, endpoints] = await Promise.all([
    api(`/v1/services/${id}`), api(`/v1/services/${id}/endpoints`)]);
  const scaling = service.autoscaling;
  const shards = service.shards.map(s => el("tr", { "data-shard": s.name },
    el("td", {}, el("a", { href: `#/jobs/${s.job}` }, s.name)), el("td", {}, s.cluster || "waiting"),
    el("td", { class: "state " + s.state }, s.state), num(s.held, { "data-field": "held" }),
    num(s.cap ?? "-", { "data-field": "cap" }), num(s.ready, { "data-field": "ready" }),
    num(s.updated), num(s.generation)));
  const ends = endpoints.items.map(e => el("tr", { "data-endpoint": e.shard },
    el("td", {}, e.cluster), el("td", {}, e.region || "-"), el("td", { "data-field": "address" }, e.address),
    el("td", {}, e.clusterIP || "-"), el("td", {}, e.ports.map(p => `${p.name}:${p.port}/${p.protocol}`).join(", ")),
    num(e.ready), el("td", {}, ago(e.reportedAt))));
  return [
    el("section", {}, el("h2", { id: "service-name" }, service.name),
      el("div", {}, service.state === "Active" ? actionButton("Delete", `/v1/services/${service.id}`, ["admin", "member"], "DELETE") : null),
      facts([["id", service.id], ["tenant", service.tenant], ["queue", service.queue],
        ["priority", `${service.priorityClass} (${service.priority})`], ["desired", service.desired],
        ["ready", service.ready], ["generation", service.generation],
        ["autoscaling", scaling ? `${scaling.metric} average ${scaling.average === null ? "-" : scaling.average.toFixed(2)}`
          + ` over ${scaling.sampled} replicas, target ${scaling.target}, replicas ${scaling.minReplicas}..${scaling.maxReplicas}`
          : "fixed replica count"]])),
    el("section", {}, el("h2", {}, "Shards"), shards.length
      ? table(["Shard", "Cluster", "State", { text: "Held", num: true }, { text: "Cap", num: true },
        { text: "Ready", num: true }, { text: "Updated", num: true }, { text: "Generation", num: true }], shards, { id: "shards" })
      : el("p", { class: "muted" }, "no shard yet")),
    el("section", {}, el("h2", {}, "Endpoints"), ends.length
      ? table(["Cluster", "Region", "Address", "Cluster IP", "Ports", { text: "Ready", num: true }, "Reported"], ends, { id: "endpoints" })
      : el("p", { class: "muted" }, "no endpoint reported yet")),
    eventsSection(service.events),
  ];
}

// ---- Shell ----------------------------------------------------------------------------

function route() {
  const [path, query] = location.hash.replace(/^#/, "").split("?");
  const parts = path.split("/").filter(Boolean);
  return { page: parts[0] || "fleet", id: parts[1], params: new URLSearchParams(query || "") };
}

async function render() {
  const main = document.getElementById("main");
  if (!sessionStorage.getItem(TOKEN_KEY)) { return; }
  const r = route();
  const hash = location.hash;
  for (const name of ["fleet", "queues", "jobs", "services"]) {
    document.getElementById("nav-" + name).classList.toggle("active", r.page === name);
  }
  try {
    if (!(r.page === "jobs" && r.id === logView?.job)) { stopLog(); }
    const sections = r.page === "queues" ? await queuesPage()
      : r.page === "jobs" ? (r.id ? await jobPage(r.id) : await jobsPage(r.params))
        : r.page === "services" ? (r.id ? await servicePage(r.id) : await servicesPage())
          : await fleetPage();
    if (location.hash !== hash) { return; }  // the user moved on while this page loaded
    main.replaceChildren(...sections);
    main.dataset.page = r.id ? (r.page === "services" ? "service" : "job") : r.page;
    main.dataset.route = hash;  // what is shown (a test waits for it)
  } catch (e) { showError(e.message); }
}

function showWho() {
  document.getElementById("signed-out").hidden = who !== null;
  document.getElementById("who").hidden = who === null;
  document.getElementById("who-role").textContent = who
    ? [who.role, who.tenant, who.subject].filter(Boolean).join(" · ") : "";
}

function signedOut() {
  sessionStorage.removeItem(TOKEN_KEY);
  who = null;
  showWho();
}

async function signIn(token) {
  sessionStorage.setItem(TOKEN_KEY, token);
  try { who = await api("/v1/whoami"); showError(""); }
  catch (e) { signedOut(); showError(e.message); }
  showWho();
  await render();
}

// ---- Sign-in at the OIDC provider: authorization code with PKCE, as a public client ------

let settings = { oidc: null };

function b64url(bytes) {
  return btoa(String.fromCharCode(...new Uint8Array(bytes))).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function randomKey() { return b64url(crypto.getRandomValues(new Uint8Array(32))); }

function redirectUri() { return location.origin + "/ui"; }

// A JWT's claims, unverified: the console only picks which token to present; the hub verifies it.
function claims(jwt) {
  try {
    const bytes = Uint8Array.from(atob(jwt.split(".")[1].replace(/-/g, "+").replace(/_/g, "/")), c => c.charCodeAt(0));
    return JSON.parse(new TextDecoder().decode(bytes));
  } catch { return {}; }
}

async function startOidc() {
  const o = settings.oidc;
  const login = { state: randomKey(), nonce: randomKey(), verifier: randomKey(), hash: location.hash };
  const challenge = b64url(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(login.verifier)));
  sessionStorage.setItem(LOGIN_KEY, JSON.stringify(login));
  location.assign(o.authorizationEndpoint + "?" + new URLSearchParams({
    response_type: "code", client_id: o.clientId, redirect_uri: redirectUri(), scope: o.scopes.join(" "),
    state: login.state, nonce: login.nonce, code_challenge: challenge, code_challenge_method: "S256" }));
}

// The provider's answer on /ui?code=…&state=…: the code exchanged for tokens, the URL cleaned.
async function finishOidc(params) {
  const login = JSON.parse(sessionStorage.getItem(LOGIN_KEY) || "null");
  sessionStorage.removeItem(LOGIN_KEY);
  history.replaceState(null, "", "/ui" + (login?.hash || "#/fleet"));
  if (params.get("error")) {
    throw new Error(`sign-in refused by the provider: ${params.get("error")} ${params.get("error_description") || ""}`);
  }
  if (!login || params.get("state") !== login.state) {
    throw new Error("sign-in answer does not match a sign-in of this tab (state): sign in again");
  }
  const o = settings.oidc;
  if (!o) { throw new Error("sign-in answer, but the hub names no OIDC provider"); }
  const response = await fetch(o.tokenEndpoint, { method: "POST", body: new URLSearchParams({
    grant_type: "authorization_code", code: params.get("code"), redirect_uri: redirectUri(),
    client_id: o.clientId, code_verifier: login.verifier }) });
  const tokens = await response.json();
  if (!response.ok) { throw new Error(`token endpoint: ${tokens.error} ${tokens.error_description || ""}`); }
  if (claims(tokens.id_token || "").nonce !== login.nonce) {
    throw new Error("the provider's ID token does not carry this sign-in's nonce");
  }
  const meant = [tokens.access_token, tokens.id_token].find(t => [claims(t || "").aud].flat().includes(o.audience));
  if (!meant) { throw new Error(`the provider issued no token for audience ${o.audience}`); }
  return meant;
}

async function start() {
  const response = await fetch("/v1/console");
  const body = await response.json();
  if (response.ok) { settings = body; } else { showError(`OIDC sign-in unavailable: ${body.detail}`); }
  document.getElementById("oidc-signin").hidden = !settings.oidc;
  const params = new URLSearchParams(location.search);
  if (params.has("code") || params.has("error")) {
    let token = null;
    try { token = await finishOidc(params); } catch (e) { showError(e.message); return; }
    await signIn(token);
  } else if (sessionStorage.getItem(TOKEN_KEY)) {
    await signIn(sessionStorage.getItem(TOKEN_KEY));
  }
}

document.getElementById("signin").addEventListener("submit", ev => {
  ev.preventDefault();
  const input = document.getElementById("token");
  signIn(input.value.trim());
  input.value = "";
});
document.getElementById("oidc-signin").addEventListener("click", () => startOidc());
document.getElementById("signout").addEventListener("click", () => {
  sessionStorage.removeItem(TOKEN_KEY);
  location.reload();
});
window.addEventListener("hashchange", render);
setInterval(() => {  // not while the user types into a form
  if (!document.activeElement?.matches("form input, form select")) { render(); }
}, REFRESH_MS);
start();
