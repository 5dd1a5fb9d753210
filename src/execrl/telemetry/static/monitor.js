// execrl monitor: polls /api/metrics?since=STEP, merges rows by step, and redraws the charts.
"use strict";

const POLL_MS = 1500;
const IDLE_AFTER_S = 30;
const PALETTE = ["--c1", "--c2", "--c3", "--c4", "--c5", "--c6", "--c7", "--c8"];
const PANELS = [
  { id: "reward", title: "Reward", match: /^reward\/(.+\/)?mean$/ },
  { id: "pass", title: "Pass rate", match: /^(reward|rollout|eval)\/.*(pass_rate|pass@\d+|solved)/, range: [0, 1] },
  // Reward pass rate and the pass rate its held-back audit confirms, side by side (reward hacking: they part).
  { id: "audit", title: "Reward vs audit", match: /^audit\/(reward_pass_rate|confirmed_pass_rate|gap)$/, range: [0, 1], optional: true },
  { id: "hack", title: "Suspicious behaviour", match: /^hack\/.*_rate$/, range: [0, 1], optional: true },
  { id: "loss", title: "Loss", match: /^loss\// },
  { id: "kl", title: "KL divergence", match: /^kl\// },
  { id: "entropy", title: "Entropy", match: /^entropy\// },
  { id: "throughput", title: "Throughput", match: /^perf\/.*per_s$/ },
  { id: "length", title: "Response length", match: /^rollout\/.*length/, optional: true },
  { id: "sandbox", title: "Sandbox", match: /^sandbox\//, optional: true },
  { id: "tools", title: "Tool calls", match: /^tools\/(calls_per_episode|parse_error_rate|time_share|truncated_outputs)$/, optional: true },
];
const TILES = [
  { label: "Reward", keys: ["reward/mean"] },
  { label: "Pass rate", keys: ["reward/pass_rate", "rollout/pass_rate", "eval/pass@1"], pct: true },
  { label: "Loss", keys: ["loss/total", "loss/policy"] },
  { label: "KL to ref", keys: ["kl/ref_mean", "kl/mean"] },
  { label: "Entropy", keys: ["entropy/mean"] },
  { label: "Tokens / s", keys: ["perf/step_tokens_per_s", "perf/tokens_per_s", "perf/rollout_tokens_per_s"] },
];

const state = {
  gen: null, rows: new Map(), steps: [], names: new Set(), alarms: [], lastStep: -1,
  lastTime: 0, lastNewData: Date.now(), connected: false, hover: null, dirty: true, signature: "",
  smoothing: Number(localStorage.getItem("execrl.smoothing") || 0.6),
};
const charts = new Map(); // card id -> {chart, panel, names}
const $ = (sel) => document.querySelector(sel);
const esc = (text) => String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function resetData() {
  state.rows.clear(); state.steps = []; state.names.clear(); state.alarms = []; state.lastStep = -1;
}

function mergeRows(rows) {
  for (const r of rows) {
    let row = state.rows.get(r.step);
    if (!row) { row = { step: r.step, time_s: 0, values: {}, bad: {} }; state.rows.set(r.step, row); }
    row.time_s = Math.max(row.time_s, r.time_s || 0);
    const bad = r.nonfinite || {};
    for (const [k, v] of Object.entries(r)) {
      if (k === "step" || k === "time_s" || k === "nonfinite") continue;
      row.values[k] = v;
      if (v === null) row.bad[k] = bad[k] || "NaN";
      state.names.add(k);
    }
  }
  state.steps = [...state.rows.keys()].sort((a, b) => a - b);
  const last = state.steps[state.steps.length - 1];
  if (last !== undefined && last !== state.lastStep) state.lastNewData = Date.now();
  state.lastStep = last === undefined ? -1 : last;
  state.lastTime = last === undefined ? 0 : state.rows.get(last).time_s;
}

function points(name) {
  const out = [];
  for (const s of state.steps) {
    const row = state.rows.get(s);
    if (name in row.values) out.push([s, row.values[name], row.bad[name] || null]);
  }
  return out;
}

function latest(name) {
  for (let i = state.steps.length - 1; i >= 0; i--) {
    const row = state.rows.get(state.steps[i]);
    if (name in row.values) return row.values[name] === null ? row.bad[name] : row.values[name];
  }
  return undefined;
}

// Headline series first: the plain mean/total of a namespace, then the rest alphabetically.
function primaryRank(name) {
  const parts = name.split("/");
  if (parts.length === 2 && /^(mean|ref_mean|total|pass_rate|step_tokens_per_s)$/.test(parts[1])) return 0;
  return parts.length === 2 ? 1 : 2;
}

// Assign every metric to the first key panel that matches, the rest to per-namespace small charts.
function layoutGroups() {
  const groups = PANELS.map((p) => ({ ...p, names: [] }));
  const other = new Map();
  for (const name of [...state.names].sort()) {
    if (name.startsWith("alarm/")) continue;
    const g = groups.find((p) => p.match.test(name));
    if (g) g.names.push(name);
    else {
      const ns = name.split("/")[0];
      if (!other.has(ns)) other.set(ns, []);
      other.get(ns).push(name);
    }
  }
  for (const g of groups) g.names.sort((a, b) => primaryRank(a) - primaryRank(b) || a.localeCompare(b));
  return { key: groups.filter((g) => !g.optional || g.names.length), other };
}

function cardFor(container, id, title, small) {
  let entry = charts.get(id);
  if (entry) return entry;
  const card = document.createElement("section");
  card.className = "card" + (small ? " small" : "");
  card.id = "card-" + id.replace(/[^a-z0-9]/gi, "-");
  card.innerHTML = `<header><h3></h3><span class="latest"></span></header><div class="legend"></div>
    <div class="plot"><canvas></canvas><div class="empty">Waiting for data…</div></div>`;
  card.querySelector("h3").textContent = title;
  container.appendChild(card);
  entry = { card };
  entry.chart = new Charts.LineChart(card, { onHover: (step, ev) => setHover(step, ev, entry) });
  charts.set(id, entry);
  return entry;
}

function renderCard(entry, names, range) {
  entry.names = names;
  entry.chart.opts.range = range;
  const series = names.map((name, i) => ({
    name, color: getComputedStyle(document.documentElement).getPropertyValue(PALETTE[i % PALETTE.length]).trim(),
    points: points(name),
  }));
  const alarms = state.alarms.map((a) => ({ ...a, hit: names.includes(a.metric) }));
  const x0 = state.steps.length ? state.steps[0] : 0;
  const x1 = state.steps.length ? state.steps[state.steps.length - 1] : 1;
  entry.chart.setData(series, alarms, [x0, Math.max(x1, x0 + 1)], state.smoothing);
  entry.series = series;
  const legend = entry.card.querySelector(".legend");
  legend.innerHTML = "";
  for (const s of series) {
    const item = document.createElement("span");
    item.innerHTML = `<i style="background:${s.color}"></i>`;
    item.append(names.length > 1 ? s.name.split("/").slice(1).join("/") : s.name);
    legend.appendChild(item);
  }
  const first = names.length ? latest(names[0]) : undefined;
  entry.card.querySelector(".latest").textContent = first === undefined ? "" : Charts.fmt(first);
  entry.chart.draw();
}

function renderCharts() {
  const { key, other } = layoutGroups();
  for (const g of key) renderCard(cardFor($("#charts"), g.id, g.title, false), g.names, g.range);
  for (const [ns, names] of other) {
    for (const name of names) renderCard(cardFor($("#other-charts"), "m:" + name, name, true), [name]);
  }
  $("#other").hidden = other.size === 0;
}

function renderTiles() {
  const box = $("#tiles");
  box.innerHTML = "";
  for (const t of TILES) {
    const name = t.keys.find((k) => state.names.has(k));
    if (!name) continue;
    const v = latest(name);
    const tile = document.createElement("div");
    tile.className = "tile" + (typeof v === "string" ? " bad" : "");
    const shown = typeof v === "number" && t.pct ? (100 * v).toFixed(1) + "%" : Charts.fmt(v);
    tile.innerHTML = `<div class="label"></div><div class="value"></div><div class="sub"></div>`;
    tile.querySelector(".label").textContent = t.label;
    tile.querySelector(".value").textContent = shown;
    tile.querySelector(".sub").textContent = name;
    box.appendChild(tile);
  }
}

function renderAlarms() {
  const list = $("#alarm-list");
  $("#alarm-count").textContent = String(state.alarms.length);
  $("#alarm-count").classList.toggle("hot", state.alarms.length > 0);
  list.innerHTML = "";
  if (!state.alarms.length) {
    list.innerHTML = `<li class="none">No alarms fired.</li>`;
    return;
  }
  for (const a of [...state.alarms].reverse()) {
    const li = document.createElement("li");
    li.innerHTML = `<span class="step"></span><span class="rule"></span><span class="action"></span><span class="msg"></span>`;
    li.querySelector(".step").textContent = "step " + a.step;
    li.querySelector(".rule").textContent = a.rule;
    li.querySelector(".action").textContent = a.action;
    li.querySelector(".msg").textContent = a.message;
    list.appendChild(li);
  }
}

function elapsed(s) {
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = Math.floor(s % 60);
  return h ? `${h}h ${String(m).padStart(2, "0")}m` : `${m}m ${String(sec).padStart(2, "0")}s`;
}

function renderStatus() {
  $("#last-step").textContent = state.lastStep < 0 ? "–" : String(state.lastStep);
  document.body.dataset.lastStep = String(state.lastStep);
  $("#elapsed").textContent = elapsed(state.lastTime);
  const idle = (Date.now() - state.lastNewData) / 1000;
  const pill = $("#status");
  const [cls, text] = !state.connected ? ["down", "disconnected"]
    : idle > IDLE_AFTER_S ? ["idle", `idle ${elapsed(idle)}`] : ["live", "live"];
  pill.className = "pill " + cls;
  pill.textContent = text;
}

function setHover(step, ev, entry) {
  state.hover = step;
  for (const e of charts.values()) { e.chart.hover = step; e.chart.draw(); }
  const tip = $("#tooltip");
  if (step === null || !entry.series) { tip.hidden = true; return; }
  const lines = [`<b>step ${step}</b>`];
  for (const s of entry.series) {
    const p = Charts.nearest(s.points, step);
    if (!p || p[0] !== step) continue;
    const v = p[1] === null ? p[2] : Charts.fmt(p[1]);
    lines.push(`<span><i style="background:${s.color}"></i>${esc(s.name)}</span><span>${esc(v)}</span>`);
  }
  for (const a of state.alarms.filter((x) => x.step === step)) lines.push(`<em>⚠ ${esc(a.message)}</em>`);
  tip.innerHTML = lines.join("");
  tip.hidden = false;
  const x = Math.min(ev.clientX + 14, window.innerWidth - tip.offsetWidth - 8);
  tip.style.left = x + "px";
  tip.style.top = ev.clientY + 14 + "px";
}

async function poll() {
  try {
    const since = state.lastStep - 1; // re-read the last step: a second line may have been added to it
    const res = await fetch(`api/metrics?since=${since}`, { cache: "no-store" });
    if (!res.ok) throw new Error("HTTP " + res.status);
    const data = await res.json();
    if (state.gen !== data.generation) { resetData(); state.gen = data.generation; }
    const signature = `${data.generation}:${data.last_step}:${JSON.stringify(data.rows).length}:${data.alarms.length}`;
    state.dirty = signature !== state.signature;
    state.signature = signature;
    mergeRows(data.rows);
    state.alarms = data.alarms;
    state.connected = true;
    $("#run-name").textContent = data.run;
    document.title = `${data.run} · step ${state.lastStep} · execrl`;
    $("#skipped").hidden = !data.skipped_lines;
    $("#skipped").textContent = `${data.skipped_lines} malformed line(s) skipped`;
  } catch (err) {
    state.connected = false;
  }
  renderStatus();
  if (state.dirty) { renderTiles(); renderAlarms(); renderCharts(); state.dirty = false; }
}

function setupControls() {
  const slider = $("#smoothing");
  slider.value = state.smoothing;
  $("#smoothing-value").textContent = state.smoothing.toFixed(2);
  slider.addEventListener("input", () => {
    state.smoothing = Number(slider.value);
    localStorage.setItem("execrl.smoothing", slider.value);
    $("#smoothing-value").textContent = state.smoothing.toFixed(2);
    renderCharts();
  });
  const saved = localStorage.getItem("execrl.theme");
  if (saved) document.documentElement.dataset.theme = saved;
  $("#theme").addEventListener("click", () => {
    const dark = getComputedStyle(document.documentElement).getPropertyValue("--is-dark").trim() === "1";
    document.documentElement.dataset.theme = dark ? "light" : "dark";
    localStorage.setItem("execrl.theme", document.documentElement.dataset.theme);
    renderCharts();
  });
  window.addEventListener("resize", () => { for (const e of charts.values()) e.chart.draw(); });
}

async function start() {
  setupControls();
  try {
    const info = await (await fetch("api/info", { cache: "no-store" })).json();
    $("#run-dir").textContent = info.run_dir;
    if (info.config) { $("#config").hidden = false; $("#config pre").textContent = info.config; }
  } catch (err) {
    state.connected = false;
  }
  await poll();
  setInterval(poll, POLL_MS);
}

start();
