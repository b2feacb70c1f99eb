// Sluice dashboard: reads the Flink-shaped REST API of the server that
// serves this page and draws the job graph (vertices coloured by their
// backpressure), a chart of checkpoint durations, sizes and persisted
// in-flight data, and the per-subtask table of a chosen checkpoint.
// Plain JS and SVG, no dependencies. Every drawing carries data-*
// attributes saying what live data it was drawn from.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const state = {
  token: sessionStorage.getItem("sluice-token") || "",
  refresh: 1000,
  job: new URLSearchParams(location.search).get("job") || "",
  chosenCheckpoint: null, // set when the user picks one
  shownCheckpoint: null,
  timer: null,
};

(function takeTokenFromFragment() {
  const m = location.hash.match(/token=([^&]+)/);
  if (m) {
    state.token = decodeURIComponent(m[1]);
    sessionStorage.setItem("sluice-token", state.token);
    history.replaceState(null, "", location.pathname + location.search);
  }
})();

class HTTPError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

async function api(path) {
  const headers = { Accept: "application/json" };
  if (state.token) headers.Authorization = "Bearer " + state.token;
  const resp = await fetch(path, { headers, cache: "no-store" });
  if (!resp.ok) {
    let msg = resp.status + " " + resp.statusText;
    try { msg = (await resp.json()).errors.join("; "); } catch (_) { /* keep the status */ }
    throw new HTTPError(resp.status, msg);
  }
  return resp.json();
}

function el(tag, attrs, parent) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (parent) parent.appendChild(e);
  return e;
}

function text(parent, x, y, s, cls, anchor) {
  const t = el("text", { x, y, class: cls || "", "text-anchor": anchor || "start" }, parent);
  t.textContent = s;
  return t;
}

function fmtBytes(n) {
  if (n == null || n < 0) return "–";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i === 0 ? n.toFixed(0) : n.toFixed(n < 10 ? 1 : 0)) + " " + u[i];
}

function fmtMs(n) {
  if (n == null || n < 0) return "–";
  if (n < 1000) return n + " ms";
  if (n < 60000) return (n / 1000).toFixed(n < 10000 ? 2 : 1) + " s";
  return (n / 60000).toFixed(1) + " min";
}

function pct(r) { return (100 * r).toFixed(0) + " %"; }

function showError(msg) {
  const e = document.getElementById("error");
  e.hidden = !msg;
  e.textContent = msg || "";
}

// ---- job graph -----------------------------------------------------------

// layout places each vertex in the column of its longest path from a
// source, in plan order within a column.
function layout(nodes) {
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const level = new Map();
  const depth = (n, seen) => {
    if (level.has(n.id)) return level.get(n.id);
    if (seen.has(n.id)) return 0;
    seen.add(n.id);
    let d = 0;
    for (const inp of n.inputs || []) {
      const from = byId.get(inp.id);
      if (from) d = Math.max(d, depth(from, seen) + 1);
    }
    level.set(n.id, d);
    return d;
  };
  nodes.forEach((n) => depth(n, new Set()));
  const columns = [];
  for (const n of nodes) {
    const c = level.get(n.id);
    (columns[c] = columns[c] || []).push(n);
  }
  return { level, columns };
}

function renderGraph(job, pressure) {
  const svg = document.getElementById("graph");
  svg.replaceChildren();
  const defs = el("defs", {}, svg);
  const marker = el("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, defs);
  el("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#7b8794" }, marker);

  const nodes = job.plan.nodes;
  const vertices = new Map(job.vertices.map((v) => [v.id, v]));
  const { columns } = layout(nodes);
  const W = 230, H = 84, GX = 90, GY = 26, PAD = 16;
  const rows = Math.max(1, ...columns.map((c) => c.length));
  const width = PAD * 2 + columns.length * W + (columns.length - 1) * GX;
  const height = PAD * 2 + rows * H + (rows - 1) * GY;
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.style.height = Math.min(height, 480) + "px";
  const pos = new Map();
  columns.forEach((col, ci) => {
    const top = PAD + ((rows - col.length) * (H + GY)) / 2;
    col.forEach((n, ri) => pos.set(n.id, { x: PAD + ci * (W + GX), y: top + ri * (H + GY) }));
  });

  for (const n of nodes) {
    for (const inp of n.inputs || []) {
      const a = pos.get(inp.id), b = pos.get(n.id);
      if (!a || !b) continue;
      const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x, y2 = b.y + H / 2, mx = (x1 + x2) / 2;
      el("path", { class: "edge", d: `M ${x1} ${y1} C ${mx} ${y1}, ${mx} ${y2}, ${x2} ${y2}`, "marker-end": "url(#arrow)",
        "data-from": inp.id, "data-to": n.id, "data-ship-strategy": inp.ship_strategy }, svg);
      text(svg, mx, (y1 + y2) / 2 - 6, inp.ship_strategy, "edge-label", "middle");
    }
  }

  let drawn = 0;
  for (const n of nodes) {
    const p = pos.get(n.id), v = vertices.get(n.id) || {};
    const bp = pressure.get(n.id);
    const level = bp ? bp.backpressureLevel : "ok";
    const ratio = bp ? Math.max(0, ...bp.subtasks.map((s) => s.ratio)) : 0;
    const busy = bp ? Math.max(0, ...bp.subtasks.map((s) => s.busyRatio)) : 0;
    const g = el("g", { class: "vertex level-" + level, transform: `translate(${p.x},${p.y})`,
      "data-vertex-id": n.id, "data-name": v.name || n.description, "data-backpressure-level": level,
      "data-backpressure-ratio": ratio.toFixed(3), "data-busy-ratio": busy.toFixed(3),
      "data-parallelism": n.parallelism, "data-status": v.status || "" }, svg);
    el("rect", { width: W, height: H, rx: 6 }, g);
    const name = v.name || n.description;
    text(g, 10, 20, name.length > 32 ? name.slice(0, 31) + "…" : name, "name").appendChild(
      Object.assign(document.createElementNS(SVG, "title"), { textContent: name }));
    text(g, 10, 39, `parallelism ${n.parallelism} · ${v.status || ""}`);
    text(g, 10, 57, `backpressured ${pct(ratio)} · busy ${pct(busy)}`);
    // A job on several hosts: which worker runs each subtask.
    const workers = bp ? bp.subtasks.filter((s) => s["taskmanager-id"]).map((s) => `${s.subtask}@${s["taskmanager-id"]}`) : [];
    if (workers.length) {
      g.setAttribute("data-workers", workers.join(" "));
      const line = "on " + workers.join(" ");
      text(g, 10, 75, line.length > 40 ? line.slice(0, 39) + "…" : line, "workers").appendChild(
        Object.assign(document.createElementNS(SVG, "title"), { textContent: line }));
    }
    drawn++;
  }
  svg.dataset.rendered = "true";
  svg.dataset.vertexCount = String(drawn);
  svg.dataset.job = job.jid;
  svg.dataset.updated = String(Date.now());
}

// ---- checkpoint chart ----------------------------------------------------

function niceMax(v) {
  if (v <= 0) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

function renderChart(timeline, enabled) {
  const svg = document.getElementById("chart");
  svg.replaceChildren();
  const W = 1000, H = 280, L = 70, R = 80, T = 14, B = 34;
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  const cps = timeline.checkpoints.filter((c) => !c.is_savepoint);
  const done = cps.filter((c) => c.status === "COMPLETED");
  svg.dataset.points = String(done.length);
  svg.dataset.failed = String(cps.length - done.length);
  svg.dataset.lastCheckpoint = done.length ? String(done[done.length - 1].id) : "";
  if (cps.length === 0) {
    text(svg, W / 2, H / 2, enabled ? "no checkpoint has finished yet" : "checkpointing is off for this job", "empty", "middle");
    svg.dataset.rendered = "true";
    return;
  }
  const t0 = cps[0].trigger_timestamp, t1 = Math.max(cps[cps.length - 1].trigger_timestamp, t0 + 1);
  const maxDur = niceMax(Math.max(1, ...done.map((c) => c.end_to_end_duration)));
  const maxBytes = niceMax(Math.max(1, ...done.map((c) => Math.max(c.checkpointed_size, c.persisted_data))));
  const x = (t) => L + ((t - t0) / (t1 - t0)) * (W - L - R);
  const yDur = (d) => H - B - (d / maxDur) * (H - T - B);
  const yBytes = (b) => H - B - (b / maxBytes) * (H - T - B);

  el("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }, svg);
  el("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }, svg);
  el("line", { class: "axis", x1: W - R, y1: T, x2: W - R, y2: H - B }, svg);
  for (let i = 0; i <= 4; i++) {
    const f = i / 4, y = H - B - f * (H - T - B);
    el("line", { class: "axis", x1: L, y1: y, x2: W - R, y2: y, "stroke-dasharray": "2 4" }, svg);
    text(svg, L - 6, y + 4, fmtMs(Math.round(f * maxDur)), "tick", "end");
    text(svg, W - R + 6, y + 4, fmtBytes(f * maxBytes), "tick");
  }
  const ticks = Math.min(6, cps.length);
  for (let i = 0; i < ticks; i++) {
    const c = cps[Math.round((i * (cps.length - 1)) / Math.max(1, ticks - 1))];
    text(svg, x(c.trigger_timestamp), H - B + 16, new Date(c.trigger_timestamp).toLocaleTimeString(), "tick", "middle");
  }
  const line = (cls, f) => {
    if (done.length === 0) return;
    el("polyline", { class: "series " + cls, points: done.map((c) => `${x(c.trigger_timestamp).toFixed(1)},${f(c).toFixed(1)}`).join(" ") }, svg);
  };
  line("duration", (c) => yDur(c.end_to_end_duration));
  line("size", (c) => yBytes(c.checkpointed_size));
  line("persisted", (c) => yBytes(c.persisted_data));
  for (const c of done) {
    const p = el("circle", { class: "point duration", cx: x(c.trigger_timestamp), cy: yDur(c.end_to_end_duration), r: 3,
      "data-checkpoint": c.id }, svg);
    p.appendChild(Object.assign(document.createElementNS(SVG, "title"), {
      textContent: `checkpoint ${c.id}: ${fmtMs(c.end_to_end_duration)}, ${fmtBytes(c.checkpointed_size)}, persisted ${fmtBytes(c.persisted_data)}`,
    }));
    p.addEventListener("click", () => chooseCheckpoint(c.id));
  }
  for (const c of cps.filter((c) => c.status !== "COMPLETED")) {
    el("circle", { class: "point failed", cx: x(c.trigger_timestamp), cy: H - B, r: 4, "data-checkpoint": c.id }, svg);
  }
  svg.dataset.maxDuration = String(Math.max(...done.map((c) => c.end_to_end_duration), 0));
  svg.dataset.rendered = "true";
  svg.dataset.updated = String(Date.now());
}

// ---- subtask table -------------------------------------------------------

function chooseCheckpoint(id) {
  state.chosenCheckpoint = id;
  document.getElementById("checkpoint-select").value = String(id);
  tick();
}

function fillCheckpointSelect(timeline, current) {
  const sel = document.getElementById("checkpoint-select");
  const ids = timeline.checkpoints.map((c) => c.id).reverse();
  const have = Array.from(sel.options).map((o) => Number(o.value));
  if (ids.join() !== have.join()) {
    sel.replaceChildren(...ids.map((id) => {
      const c = timeline.checkpoints.find((x) => x.id === id);
      const o = document.createElement("option");
      o.value = String(id);
      o.textContent = `${id}${c.is_savepoint ? " (savepoint)" : ""}${c.status === "FAILED" ? " (failed)" : ""}`;
      return o;
    }));
  }
  if (current != null) sel.value = String(current);
}

async function renderSubtasks(jobId, job, checkpointId) {
  const table = document.getElementById("subtasks");
  const body = table.tBodies[0];
  if (checkpointId == null) {
    body.replaceChildren();
    table.dataset.checkpoint = "";
    return;
  }
  const details = await api(`/jobs/${jobId}/checkpoints/details/${checkpointId}`);
  const rows = [];
  for (const v of job.vertices) {
    if (!details.tasks[v.id]) continue;
    const sub = await api(`/jobs/${jobId}/checkpoints/details/${checkpointId}/subtasks/${v.id}`);
    for (const s of sub.subtasks) {
      const tr = document.createElement("tr");
      tr.dataset.vertex = v.name;
      tr.dataset.subtask = String(s.index);
      const done = s.status === "completed";
      if (!done) tr.className = "pending";
      const cells = done
        ? [v.name, s.index, s.status, fmtMs(s.start_delay), fmtMs(s.alignment.duration), fmtMs(s.checkpoint.sync),
            fmtMs(s.checkpoint.async), fmtMs(s.end_to_end_duration), fmtBytes(s.checkpointed_size),
            fmtBytes(s.alignment.persisted), String(s.unaligned_checkpoint)]
        : [v.name, s.index, s.status, "", "", "", "", "", "", "", ""];
      for (const c of cells) {
        const td = document.createElement("td");
        td.textContent = String(c);
        tr.appendChild(td);
      }
      rows.push(tr);
    }
  }
  body.replaceChildren(...rows);
  table.dataset.checkpoint = String(checkpointId);
  table.dataset.rows = String(rows.length);
  document.getElementById("checkpoint-info").textContent =
    `${details.checkpoint_type.toLowerCase().replace("_", " ")}, ${details.status.toLowerCase()}, end-to-end ${fmtMs(details.end_to_end_duration)}, ` +
    `${fmtBytes(details.checkpointed_size)}, persisted ${fmtBytes(details.persisted_data)}`;
  state.shownCheckpoint = checkpointId;
}

// ---- watermarks ---------------------------------------------------------

// Watermarks are unix milliseconds; Long.MIN_VALUE (no watermark yet) and
// Long.MAX_VALUE (end of input) arrive as JSON numbers beyond 2^53.
const NO_WATERMARK = -9.2e18, END_WATERMARK = 9.2e18;

function fmtWatermark(wm) {
  if (wm <= NO_WATERMARK) return "no watermark";
  if (wm >= END_WATERMARK) return "end of input";
  return new Date(wm).toISOString().replace("T", " ").replace("Z", "");
}

function fmtLag(wm, now) {
  if (wm <= NO_WATERMARK || wm >= END_WATERMARK) return "";
  return fmtMs(Math.max(0, now - wm));
}

async function renderWatermarks(jobId, job) {
  const table = document.getElementById("watermarks");
  const details = await Promise.all(job.vertices.map((v) => api(`/jobs/${jobId}/vertices/${v.id}`)));
  const rows = [];
  for (const d of details) {
    for (const s of d.subtasks) {
      const tr = document.createElement("tr");
      tr.dataset.wmVertex = d.name;
      tr.dataset.wmSubtask = String(s.subtask);
      tr.dataset.inputWatermark = String(s["current-input-watermark"]);
      tr.dataset.outputWatermark = String(s["current-output-watermark"]);
      const cells = [d.name, s.subtask, s.status, fmtWatermark(s["current-input-watermark"]),
        fmtWatermark(s["current-output-watermark"]), fmtLag(s["current-input-watermark"], d.now)];
      for (const c of cells) {
        const td = document.createElement("td");
        td.textContent = String(c);
        tr.appendChild(td);
      }
      rows.push(tr);
    }
  }
  table.tBodies[0].replaceChildren(...rows);
  table.dataset.rows = String(rows.length);
}

// ---- refresh loop --------------------------------------------------------

async function loadJobs() {
  const { jobs } = await api("/jobs/overview");
  const sel = document.getElementById("job-select");
  const ids = jobs.map((j) => j.jid);
  if (Array.from(sel.options).map((o) => o.value).join() !== ids.join()) {
    sel.replaceChildren(...jobs.map((j) => {
      const o = document.createElement("option");
      o.value = j.jid;
      o.textContent = `${j.name} (${j.jid.slice(0, 8)})`;
      return o;
    }));
  }
  if (!state.job || !ids.includes(state.job)) {
    const running = jobs.filter((j) => j.state === "RUNNING");
    state.job = (running.length ? running[running.length - 1] : jobs[jobs.length - 1] || {}).jid || "";
  }
  sel.value = state.job;
  return jobs.find((j) => j.jid === state.job);
}

async function tick() {
  try {
    const overview = await loadJobs();
    if (!overview) {
      showError("no job is registered with this server yet");
      return;
    }
    const id = overview.jid;
    const job = await api(`/jobs/${id}`);
    const badge = document.getElementById("job-state");
    badge.textContent = job.state;
    badge.className = "badge " + job.state;
    document.getElementById("job-meta").textContent =
      `${job.vertices.length} vertices · up ${fmtMs(job.duration)} · id ${job.jid}`;

    const pressure = new Map();
    await Promise.all(job.vertices.map(async (v) => {
      pressure.set(v.id, await api(`/jobs/${id}/vertices/${v.id}/backpressure`));
    }));
    renderGraph(job, pressure);
    await renderWatermarks(id, job);

    let timeline = { checkpoints: [] }, stats = null;
    try {
      [stats, timeline] = await Promise.all([api(`/jobs/${id}/checkpoints`), api(`/jobs/${id}/checkpoints/timeline`)]);
    } catch (e) {
      if (!(e instanceof HTTPError && e.status === 404)) throw e;
    }
    const counts = stats ? stats.counts : null;
    document.getElementById("checkpoint-counts").textContent = counts
      ? `completed ${counts.completed} · failed ${counts.failed} · in progress ${counts.in_progress}` +
        (stats.latest.restored ? ` · restored from ${stats.latest.restored.id}` : "")
      : "checkpointing is off";
    renderChart(timeline, stats != null);

    const latest = stats && stats.latest.completed ? stats.latest.completed.id : null;
    const want = state.chosenCheckpoint != null ? state.chosenCheckpoint : latest;
    fillCheckpointSelect(timeline, want);
    if (want !== state.shownCheckpoint || want === latest) await renderSubtasks(id, job, want);
    document.getElementById("refresh-state").textContent = "updated " + new Date().toLocaleTimeString();
    document.body.dataset.live = "true";
    showError("");
  } catch (e) {
    if (e instanceof HTTPError && e.status === 401) {
      document.getElementById("auth").hidden = false;
      showError("unauthorized: enter the server's token");
    } else {
      showError(String(e.message || e));
    }
  }
}

function schedule() {
  clearTimeout(state.timer);
  tick().finally(() => { state.timer = setTimeout(schedule, state.refresh); });
}

document.getElementById("job-select").addEventListener("change", (ev) => {
  state.job = ev.target.value;
  state.chosenCheckpoint = null;
  state.shownCheckpoint = null;
  schedule();
});
document.getElementById("checkpoint-select").addEventListener("change", (ev) => chooseCheckpoint(Number(ev.target.value)));
document.getElementById("auth-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  state.token = document.getElementById("auth-token").value;
  sessionStorage.setItem("sluice-token", state.token);
  document.getElementById("auth").hidden = true;
  schedule();
});

(async function start() {
  try {
    const cfg = await api("/config");
    state.refresh = Math.max(250, cfg["refresh-interval"] || 1000);
  } catch (_) { /* the first tick reports it */ }
  const r = Number(new URLSearchParams(location.search).get("refresh"));
  if (r > 0) state.refresh = r;
  schedule();
})();
