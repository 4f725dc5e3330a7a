// ctxguard dashboard. Every page is built from the JSON API with DOM
// calls and textContent: data (session keys, model names, stub text,
// bodies) is never parsed as HTML.
"use strict";

// Theme: "auto" follows the system; the choice is kept in localStorage.
const themes = ["auto", "light", "dark"];
function storedTheme() {
  try { return localStorage.getItem("ctxguard-theme") || "auto"; } catch (e) { return "auto"; }
}
function applyTheme(t) {
  if (t === "auto") delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = t;
}
function effectiveTheme() {
  const t = document.documentElement.dataset.theme;
  if (t) return t;
  return window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
}
applyTheme(storedTheme());

// el builds an element: attrs are set as attributes (href only to
// same-origin paths), children are nodes or text.
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "href" || k === "src") {
      if (!String(v).startsWith("/")) continue;
    }
    e.setAttribute(k, String(v));
  }
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

// Numbers that mean something.
function tokens(n) {
  const a = Math.abs(n);
  if (a < 1000) return String(n);
  if (a < 10000) return (n / 1000).toFixed(1) + "K";
  if (a < 1e6) return Math.round(n / 1000) + "K";
  if (a < 1e7) return (n / 1e6).toFixed(2) + "M";
  return (n / 1e6).toFixed(1) + "M";
}
function exact(n) { return Number(n).toLocaleString("en-US"); }
// usd rounds dollars to what a person reads: cents, or "< $0.01" for
// less than a cent; usdExact keeps the figure for tooltips.
function usd(x) {
  if (x === 0) return "$0";
  if (x < 0) return -x < 0.005 ? "> −$0.01" : "−" + usd(-x);
  if (x < 0.005) return "< $0.01";
  if (x < 1000) return "$" + x.toFixed(2);
  return "$" + Math.round(x).toLocaleString("en-US");
}
function usdExact(x) { return "$" + Number(x).toFixed(6); }
function pct(x) { return (x * 100).toFixed(x < 0.1 && x > 0 ? 1 : 0) + "%"; }
function ago(t, now) {
  const s = Math.max(0, (new Date(now) - new Date(t)) / 1000);
  if (s < 60) return Math.round(s) + "s ago";
  if (s < 3600) return Math.round(s / 60) + "m ago";
  if (s < 86400) return (s / 3600).toFixed(1) + "h ago";
  return (s / 86400).toFixed(1) + "d ago";
}
function clock(t) { return new Date(t).toLocaleTimeString(); }
function ms(x) { return x >= 1000 ? (x / 1000).toFixed(2) + " s" : x.toFixed(1) + " ms"; }
function bytes(n) {
  const a = Math.abs(n);
  if (a < 1024) return n + " B";
  if (a < 1 << 20) return (n / 1024).toFixed(1) + " KiB";
  return (n / (1 << 20)).toFixed(1) + " MiB";
}

// num is a numeric cell: the figure shown, the exact value kept for
// tooltips and tests.
function num(value, shown, field) {
  return el("td", { class: "num", title: exact(value), "data-field": field, "data-value": value }, shown);
}
function tokCell(n, field) { return num(n, tokens(n), field); }
function usdCell(x, field) {
  return el("td", { class: "num", title: usdExact(x), "data-field": field, "data-value": x }, usd(x));
}
// added says what ctxguard added on purpose (API settings, such as the
// thinking binding's drop_block): never a negative saving.
function added(n) {
  return n > 0 ? "+" + tokens(n) + " added on purpose (API settings)" : "";
}

function sessionHref(key) { return "/ctxguard/session?key=" + encodeURIComponent(key); }
function requestHref(seq) { return "/ctxguard/request?seq=" + encodeURIComponent(seq); }

async function get(url) {
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), 10000);
  try {
    const r = await fetch(url, { signal: ctl.signal, cache: "no-store" });
    const body = await r.json();
    if (!r.ok) throw new Error((body.error && body.error.message) || r.statusText);
    return body;
  } finally {
    clearTimeout(timer);
  }
}

function card(label, value, note, field, title) {
  return el("div", { class: "card", "data-card": field, title: title },
    el("div", { class: "label" }, label),
    el("div", { class: "value" }, value),
    note ? el("div", { class: "note" }, note) : null);
}

function gauge(full, sent, window) {
  if (!window) return el("span", { class: "muted", title: "window unknown" }, tokens(sent) + " sent");
  const f = el("div", { class: "fill" + (full > 0.9 ? " bad" : full > 0.7 ? " warn" : "") });
  f.style.width = Math.min(100, full * 100).toFixed(1) + "%";
  return el("div", { class: "gauge", title: exact(sent) + " of " + exact(window) + " tokens" },
    el("div", { class: "bar" }, f), el("span", { class: "pct" }, pct(full)));
}

function table(headers, rows) {
  return el("table", {},
    el("thead", {}, el("tr", {}, ...headers.map(h => el("th", { class: h.endsWith(" ") ? "num" : "" }, h.trim())))),
    el("tbody", {}, ...rows));
}

function replaceMain(...nodes) {
  const m = document.getElementById("main");
  m.replaceChildren(...nodes.filter(n => n !== null && n !== undefined && n !== false));
}

function fail(err) {
  replaceMain(el("p", { class: "error" }, "Could not load: " + err.message));
}

// ---- pages

async function overview() {
  const o = await get("/ctxguard/api/overview");
  const t = o.today;
  const savedPct = t.tokens_before ? t.tokens_saved / t.tokens_before : 0;
  const cards = el("div", { class: "cards" },
    card("Requests today", exact(t.requests), [t.rewritten + " rewritten",
      t.unlisted ? t.unlisted + " in no session (bypassed or unreadable)" : ""].filter(Boolean).join(" · "), "requests"),
    card("Tokens saved", tokens(t.tokens_saved), [pct(savedPct) + " of " + tokens(t.tokens_before) + " sent by clients",
      added(t.tokens_added)].filter(Boolean).join(" · "), "tokens_saved", exact(t.tokens_saved) + " tokens"),
    card("Saved", usd(t.saved_usd), "at cache-read prices (a lower bound)" + (t.tokens_added ? "; the settings added cost " + usd(t.added_usd) : ""),
      "saved_usd", usdExact(t.saved_usd)),
    card("Spent", usd(t.spent_usd), "prompts as the API billed them", "spent_usd", usdExact(t.spent_usd)),
    t.dry_run ? card("Would save", tokens(t.tokens_would_save), "dry run: " + t.dry_run + " requests went unchanged · " + usd(t.would_save_usd),
      "would_save", exact(t.tokens_would_save) + " tokens") : null,
    card("Edit events", exact(t.events), t.compactions + " compactions", "events"),
    card("Stubs", exact(t.stubs), "items moved to blobs", "stubs"));
  const rows = o.sessions.map(s => el("tr", { "data-session": s.key, class: s.events ? "event" : "" },
    el("td", { class: "key" }, el("a", { href: sessionHref(s.key) }, s.key),
      s.live ? " " : null, s.live ? el("span", { class: "badge live" }, "live") : null,
      s.dry_run ? " " : null, s.dry_run ? el("span", { class: "badge" }, "dry run") : null),
    el("td", { class: "nowrap" }, s.client || "—"),
    el("td", { class: "nowrap" }, s.model || "—"),
    el("td", {}, gauge(s.full, s.last_sent, s.window)),
    tokCell(s.last_before, "last_before"),
    tokCell(s.last_after, "last_after"),
    num(s.requests, exact(s.requests), "requests"),
    tokCell(s.tokens_saved, "tokens_saved"),
    usdCell(s.saved_usd, "saved_usd"),
    num(s.events, exact(s.events), "events"),
    el("td", { class: "num", title: new Date(s.last).toString() }, ago(s.last, o.now))));
  replaceMain(
    el("h1", {}, "Overview"),
    el("p", { class: "sub" }, "Today since midnight · " + o.sessions.length + " sessions kept · " + exact(o.since_start.requests) + " requests since start"),
    o.today_error ? el("p", { class: "error", id: "today-error" }, "Today's totals could not go through the store: " + o.today_error) : null,
    cards,
    el("h2", {}, "Sessions"),
    o.sessions.length === 0 ? el("p", { class: "muted" }, "No requests yet. Point a client at ctxguard (ANTHROPIC_BASE_URL=http://127.0.0.1:8787) and its sessions appear here.") :
      table(["Session", "Client", "Model", "Context used", "Last prompt ", "Last sent ", "Requests ", "Tokens saved ", "Saved ", "Events ", "Last seen "], rows));
}

async function sessionPage() {
  const key = new URLSearchParams(location.search).get("key") || "";
  const v = await get("/ctxguard/api/session/" + encodeURIComponent(key));
  const s = v.session;
  document.title = "ctxguard · " + s.key;
  const chart = el("img", { id: "chart", alt: "prompt tokens per request, original and sent, against the overflow line, with edit events and compactions marked" });
  chart.src = "/ctxguard/api/session/" + encodeURIComponent(key) + "/chart.svg?theme=" + effectiveTheme() + "&seq=" + s.last_seq;
  const rows = v.points.slice().reverse().map(p => {
    const sent = p.dry_run && p.would_send ? p.would_send : p.tokens_after;
    const saved = (p.dry_run ? p.tokens_would_save : p.tokens_saved) || 0;
    return el("tr", { "data-seq": p.seq, "data-n": p.n, class: p.event ? "event" : "" },
      el("td", { class: "num", title: "request " + p.seq + " since start" }, p.detail ? el("a", { href: requestHref(p.seq) }, "#" + p.n) : "#" + p.n),
      el("td", {}, clock(p.time)),
      tokCell(p.tokens_before, "tokens_before"),
      num(sent, tokens(sent) + (p.dry_run ? " (would send)" : ""), "tokens_after"),
      el("td", { class: "num", "data-field": "saved", "data-value": saved, title: [exact(saved) + " tokens taken out", added(p.tokens_added)].filter(Boolean).join("; ") },
        p.tokens_before ? pct(saved / p.tokens_before) : "—",
        p.tokens_added ? el("span", { class: "muted small" }, " +" + tokens(p.tokens_added)) : null),
      num(p.calibrated_after, p.calibrated_after ? tokens(p.calibrated_after) : "—", "calibrated_after"),
      el("td", {}, p.compaction ? el("span", { class: "badge compaction" }, "compaction") : p.event ? el("span", { class: "badge event" }, "edit event") : null,
        p.client_compaction ? el("span", { class: "badge" }, "client compaction") : null,
        p.dry_run ? el("span", { class: "badge" }, "dry run") : null),
      el("td", {}, p.outcome),
      num(p.status, p.status || "—", "status"),
      tokCell(p.cache_read, "cache_read"),
      tokCell(p.cache_write, "cache_write"),
      usdCell(p.spent_usd, "spent_usd"),
      usdCell(p.saved_usd, "saved_usd"));
  });
  replaceMain(
    el("h1", {}, s.key),
    el("p", { class: "sub" }, [s.client || "unknown client", s.model || "unknown model", s.protocol,
      exact(s.requests) + " requests", tokens(s.tokens_saved) + " tokens saved (" + usd(s.saved_usd) + ")",
      s.events + " edit events", s.compactions ? s.compactions + " compactions" : "",
      s.dry_run ? "dry run: figures after are what would have been sent" : ""].filter(Boolean).join(" · ")),
    el("div", { class: "cards" },
      card("Context used", s.window ? pct(s.full) : "—", s.window ? tokens(s.last_sent) + " of " + tokens(s.window) +
        (s.overflow_line ? " · overflow line " + tokens(s.overflow_line) : "") : "window unknown", "full"),
      card("Tokens saved", tokens(s.tokens_saved), [s.tokens_before ? pct(s.tokens_saved / s.tokens_before) + " of the original" : "",
        added(s.tokens_added)].filter(Boolean).join(" · "), "tokens_saved", exact(s.tokens_saved) + " tokens"),
      card("Saved", usd(s.saved_usd), "spent " + usd(s.spent_usd), "saved_usd", usdExact(s.saved_usd)),
      s.dry_run ? card("Would save", tokens(s.tokens_would_save), "dry run · " + usd(s.would_save_usd), "would_save") : null,
      card("Cache", tokens(s.cache_read), "read · " + tokens(s.cache_write) + " written", "cache")),
    el("div", { class: "chart" }, chart),
    el("h2", {}, "Requests"),
    v.dropped ? el("p", { class: "muted" }, v.dropped + " older requests are no longer kept (dashboard.requests).") : null,
    table(["# ", "Time", "Prompt ", "Sent ", "Saved ", "API tokens ", "", "Outcome", "Status ", "Cache read ", "Cache write ", "Spent ", "Saved $ "], rows));
}

async function requestPage() {
  const seq = new URLSearchParams(location.search).get("seq") || "";
  const r = await get("/ctxguard/api/request/" + encodeURIComponent(seq));
  document.title = "ctxguard · request " + r.seq;
  const saved = (r.dry_run ? r.tokens_would_save : r.tokens_saved) || 0;
  const after = r.dry_run && r.would_send ? r.would_send : r.tokens_after;
  const facts = el("dl", { class: "facts" });
  const fact = (k, ...v) => facts.append(el("dt", {}, k), el("dd", {}, ...v));
  fact("Session", r.session ? el("a", { href: sessionHref(r.session) }, r.session) : "none (bypassed or unreadable: counted, listed in no session)");
  fact("Model", r.model || "—", r.window ? " · window " + tokens(r.window) + " · max output " + tokens(r.max_output) : "");
  fact("Client", (r.client || "—") + " · " + (r.protocol || "") + " " + (r.path || "") + (r.route ? " · route " + r.route : ""));
  fact("Outcome", r.outcome, r.skipped ? " (" + r.skipped + ")" : "", r.reason ? ": " + r.reason : "", r.error_id ? " · error " + r.error_id : "");
  fact("Status", String(r.status || "none (the client left)"));
  fact("Tokens", el("span", { "data-field": "tokens_before", "data-value": r.tokens_before }, exact(r.tokens_before)), " → ",
    el("span", { "data-field": "tokens_after", "data-value": after }, exact(after)),
    " (" + (r.tokens_before ? pct(saved / r.tokens_before) : "0%") + (r.dry_run ? " would be saved in a dry run: the original went" : " saved") + ", estimated" +
    (r.tokens_added ? "; " + added(r.tokens_added) : "") + ")");
  if (r.calibrated_before) fact("API tokens", exact(r.calibrated_before) + " → " + exact(r.calibrated_after));
  const causes = { threshold: "the history grew past a rule's trigger", cold: "the prompt cache had expired, so the edit cost no cache write", overflow: "the request would not have fitted the window", recovery: "the retry of a request the upstream found too long" };
  fact("Edit event", r.event ? el("span", { class: "badge event", "data-cause": r.cause || "" }, "yes: the prompt cache is written again from the change") : "no",
    r.event && causes[r.cause] ? " (" + causes[r.cause] + ")" : "");
  if (r.cold) fact("Cache", "cold: the request came after its session's prompt cache had expired");
  if (r.usage) fact("Usage", exact(r.usage.input) + " input · " + exact(r.usage.cache_read) + " cache read · " + exact(r.usage.cache_write) + " cache write · " + exact(r.usage.output) + " output");
  fact("Money", "spent " + usd(r.spent_usd) + " · saved " + usd(r.saved_usd) + (r.added_usd ? " · settings added " + usd(r.added_usd) : ""));
  fact("Bytes", bytes(r.bytes_in) + " → " + bytes(r.bytes_out) + " · answer " + bytes(r.bytes_resp));
  fact("Time", "read " + ms(r.read_ms) + " · rewrite " + ms(r.rewrite_ms) + " · first byte " + ms(r.first_byte_ms) + " · total " + ms(r.total_ms));

  const passes = r.passes.map(p => el("tr", { "data-pass": p.name },
    el("td", {}, p.name), num(p.edits, exact(p.edits), "edits"), num(p.saved_bytes, bytes(p.saved_bytes), "saved_bytes"),
    num(p.added_bytes || 0, p.added_bytes ? bytes(p.added_bytes) : "—", "added_bytes")));
  const stubs = r.stubs.map(s => el("tr", { class: "stub", "data-blob": s.blob },
    el("td", { class: "mono" }, s.url ? el("a", { class: "blob", href: s.url }, s.blob) : s.blob),
    num(s.bytes, bytes(s.bytes), "bytes"), num(s.sent, bytes(s.sent), "sent"),
    el("td", {}, el("pre", {}, s.text || ""))));
  const parts = [
    el("h1", {}, r.n ? "Request #" + r.n + " of its session" : "Request " + r.seq + " (no session)"),
    el("p", { class: "sub" }, new Date(r.start).toString() + " · request " + r.seq + " since start"),
    facts,
    el("h2", {}, "Passes"),
    passes.length ? table(["Pass", "Edits ", "Bytes saved ", "Added on purpose "], passes) : el("p", { class: "muted" }, "No pass ran."),
    el("h2", {}, "Cleared and stored items (" + r.stubs.length + ")"),
    stubs.length ? table(["Blob", "Original ", "Sent ", "Stub"], stubs) : el("p", { class: "muted" }, "Nothing was replaced by a stub."),
  ];
  if (r.compaction) {
    parts.push(el("h2", {}, "Compaction summary"),
      r.summary_error ? el("p", { class: "error" }, r.summary_error) : el("pre", { id: "summary" }, r.summary || ""));
  }
  if (r.notes.length) parts.push(el("h2", {}, "Notes"), el("ul", {}, ...r.notes.map(n => el("li", {}, n))));
  parts.push(el("h2", {}, "Bodies"));
  if (r.bodies) {
    parts.push(el("div", { class: "cols" },
      el("div", {}, el("h3", {}, "Before"), el("pre", { id: "body-before" }, r.bodies.before)),
      el("div", {}, el("h3", {}, "After"), el("pre", { id: "body-after" }, r.bodies.after))));
  } else {
    parts.push(el("p", { class: "muted" }, "Bodies are kept for the last 16 requests with dashboard.show_bodies: true (off by default: they hold your code)."));
  }
  replaceMain(...parts);
}

async function configPage() {
  const c = await get("/ctxguard/api/config");
  const rows = c.models.map(m => el("tr", {},
    el("td", {}, m.name), el("td", {}, m.id), el("td", {}, m.provider || "—"),
    tokCell(m.window, "window"), tokCell(m.max_output, "max_output"),
    el("td", {}, m.known ? "yes" : "no (default limits)"),
    el("td", { class: "num" }, m.price ? "$" + m.price.input + " / $" + m.price.cache_write + " / $" + m.price.cache_read : "—")));
  replaceMain(
    el("h1", {}, "Configuration"),
    el("h2", {}, "Models seen"),
    rows.length ? table(["Model", "Registry id", "Provider", "Window ", "Max output ", "Known", "Input / cache write / read per M "], rows) :
      el("p", { class: "muted" }, "No model seen yet."),
    el("h2", {}, "Summarizer"),
    breakersView(c.breakers || []),
    el("h2", {}, "Effective configuration"),
    el("pre", { id: "yaml" }, c.yaml || "(not available)"));
}

// breakersView shows the summarizer's circuit breakers, one per upstream
// and model it called.
function breakersView(bs) {
  if (!bs.length) return el("p", { class: "muted" }, "No summarizer call yet.");
  const when = t => t ? new Date(t).toLocaleTimeString() : "—";
  return table(["Upstream", "Model", "State", "Failures in a row ", "Last failure", "Next probe", "Opened ", "Refused "],
    bs.map(b => el("tr", { "data-breaker": b.state },
      el("td", {}, b.upstream), el("td", {}, b.model),
      el("td", { "data-field": "state" }, b.state === "closed" ? "closed: calls are made" :
        b.state === "open" ? "open: summaries are extractive" : "probing: one call checks it"),
      el("td", { class: "num" }, String(b.fails)), el("td", {}, b.error || "—"),
      el("td", {}, b.state === "open" ? when(b.until) : "—"),
      el("td", { class: "num" }, String(b.trips)), el("td", { class: "num" }, String(b.refused)))));
}

// ---- wiring

const pages = { overview, session: sessionPage, request: requestPage, config: configPage };
const titles = { overview: "Overview", session: "Session", request: "Request", config: "Configuration" };

function start() {
  // The page is named by the path: /ctxguard/, /ctxguard/session, ...
  const page = location.pathname.replace(/^\/ctxguard\/?/, "").replace(/\/$/, "") || "overview";
  document.body.dataset.page = page;
  document.title = "ctxguard · " + (titles[page] || "not found");
  const render = pages[page] || (async () => replaceMain(el("p", { class: "error" }, "No such page.")));
  for (const a of document.querySelectorAll("[data-nav]")) {
    if (a.dataset.nav === page) a.classList.add("current");
  }
  const btn = document.getElementById("theme");
  btn.textContent = "theme: " + storedTheme();
  btn.addEventListener("click", () => {
    const t = themes[(themes.indexOf(storedTheme()) + 1) % themes.length];
    try { localStorage.setItem("ctxguard-theme", t); } catch (e) { /* private mode */ }
    applyTheme(t);
    btn.textContent = "theme: " + t;
    refresh();
  });
  let busy = false, again = false;
  async function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    try { await render(); document.body.dataset.loaded = "1"; } catch (e) { fail(e); } finally {
      busy = false;
      if (again) { again = false; refresh(); }
    }
  }
  refresh();
  if (page === "config" || page === "request") return; // they do not change
  // Live: a note per exchange triggers a refresh (at most one in
  // flight); polling every 10 s covers a stream that is refused or lost.
  const live = document.getElementById("live");
  let timer = null;
  if (window.EventSource) {
    const es = new EventSource("/ctxguard/api/events");
    es.addEventListener("open", () => live.classList.add("on"));
    es.addEventListener("error", () => live.classList.remove("on"));
    es.addEventListener("exchange", () => {
      clearTimeout(timer);
      timer = setTimeout(refresh, 250);
    });
  }
  setInterval(refresh, 10000);
}

document.addEventListener("DOMContentLoaded", start);
