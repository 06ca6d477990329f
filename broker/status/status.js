// The status page's script: polls /status, /status/workers and
// /status/methods about once a second and fills the page. Every string
// that comes from the broker (worker names, services, hosts, methods,
// refusal reasons) is inserted with textContent, never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
let polls = 0;
let prevMethods = null;   // { at: ms, calls: Map key -> calls } of the last poll

function text(el, s) {
    el.textContent = s === undefined || s === null ? "" : String(s);
    return el;
}

function cell(row, value, cls) {
    const td = document.createElement("td");
    text(td, value);
    if (cls)
        td.className = cls;
    row.appendChild(td);
    return td;
}

function duration(ms) {
    const s = Math.floor(ms / 1000);
    if (s < 60)
        return `${(ms / 1000).toFixed(1)} s`;
    const d = Math.floor(s / 86400), h = Math.floor(s / 3600) % 24, m = Math.floor(s / 60) % 60;
    return (d ? `${d}d ` : "") + (d || h ? `${h}h ` : "") + `${m}m ${s % 60}s`;
}

function num(v, digits) {
    if (typeof v !== "number" || !isFinite(v))
        return "–";
    return digits === undefined ? String(v) : v.toFixed(digits);
}

// Replaces tbody's rows with one per item, built by fill(row, item).
function rows(tbody, items, fill) {
    const frag = document.createDocumentFragment();
    for (const it of items) {
        const tr = document.createElement("tr");
        fill(tr, it);
        frag.appendChild(tr);
    }
    tbody.replaceChildren(frag);
}

async function getJson(path) {
    const r = await fetch(path, { cache: "no-store" });
    if (!r.ok)
        throw new Error(`${path}: HTTP ${r.status}`);
    return r.json();
}

function showStatus(s) {
    text($("version"), s.version);
    text($("uptime"), duration(s.uptime_ms));
    text($("bodies-open"), num(s.bodies_open));
    text($("calls-queued"), num(s.calls_queued));
    text($("queued-bytes"), num(s.queued_bytes));
    text($("calls-inflight"), num(s.calls_inflight));
    text($("workers-count"), num(s.workers_connected));
    rows($("listeners"), s.listeners || [], (tr, l) => {
        cell(tr, l.name);
        cell(tr, l.endpoint);
        cell(tr, l.tls ? "on" : "off", l.tls ? "ok" : "muted");
    });
    const r = s.redis || {}, g = s.replay || {}, f = g.fence || {};
    const redis = $("redis");
    text(redis, !r.in_use ? "not used" : r.up ? "up" : "down");
    redis.className = "big " + (!r.in_use ? "muted" : r.up ? "ok" : "bad");
    text($("redis-detail"), r.in_use ? `${r.mode} · ${num(r.rtt_ms_avg, 2)} ms rtt · ${r.reconnects} reconnects` : "");
    const replay = $("replay");
    text(replay, !g.on ? "off" : f.active ? "fenced" : g.up ? "on" : "unavailable");
    replay.className = "big " + (!g.on ? "muted" : f.active ? "warn" : g.up ? "ok" : "bad");
    text($("fence"), f.active
        ? `memory lost at ${new Date(g.lost_at * 1000).toISOString()}; refusing bodies signed before ` +
          `${new Date(f.ends_at * 1000).toISOString()} (${f.ends_in_s} s left)`
        : g.memory_losses ? `${g.memory_losses} memory loss(es), fence over` : "");
    text($("refused-total"), `(${s.refused_total} in all)`);
    rows($("refusals"), s.refusals || [], (tr, x) => {
        cell(tr, duration(x.age_ms) + " ago");
        cell(tr, x.transport);
        cell(tr, x.outcome);
        cell(tr, x.code, "num");
        cell(tr, x.reason || x.message, "reason");
    });
    drawHist(s.latency);
}

// The broker-wide call latency as bars, one per bucket (counts since start).
function drawHist(h) {
    const svg = $("hist"), NS = "http://www.w3.org/2000/svg";
    if (!h || !Array.isArray(h.counts))
        return;
    const W = 480, H = 180, top = 8, bottom = 30, n = h.counts.length;
    const max = Math.max(1, ...h.counts), bw = W / n;
    const kids = [];
    h.counts.forEach((c, i) => {
        const bh = c ? Math.max(1, (H - top - bottom) * c / max) : 0;
        const rect = document.createElementNS(NS, "rect");
        rect.setAttribute("x", String(i * bw + 1));
        rect.setAttribute("y", String(H - bottom - bh));
        rect.setAttribute("width", String(Math.max(1, bw - 2)));
        rect.setAttribute("height", String(bh));
        const title = document.createElementNS(NS, "title");
        text(title, `≤ ${i < h.le.length ? h.le[i] + " s" : "+Inf"}: ${c}`);
        rect.appendChild(title);
        kids.push(rect);
        if (i % 2 === 0 || i === n - 1) {
            const t = document.createElementNS(NS, "text");
            t.setAttribute("x", String(i * bw + bw / 2));
            t.setAttribute("y", String(H - bottom + 12 + (i % 4 === 0 ? 0 : 10)));
            t.setAttribute("text-anchor", "middle");
            const le = i < h.le.length ? h.le[i] : Infinity;
            text(t, le === Infinity ? "+Inf" : le < 1 ? `${+(le * 1000).toFixed(2)}ms` : `${le}s`);
            kids.push(t);
        }
    });
    svg.replaceChildren(...kids);
    text($("hist-note"), `${h.count} calls, mean ${h.count ? ((h.sum_s / h.count) * 1000).toFixed(2) : "–"} ms`);
}

function showWorkers(w) {
    const list = (w && w.workers) || [];
    rows($("workers"), list, (tr, x) => {
        tr.dataset.name = x.name;
        cell(tr, x.name, "name");
        cell(tr, x.service);
        cell(tr, x.host);
        cell(tr, x.credit, "num");
        cell(tr, x.in_flight, "num");
        cell(tr, x.answered, "num");
        cell(tr, x.errors, "num");
        cell(tr, x.timeouts, "num");
        cell(tr, typeof x.last_heard_ms === "number" ? duration(x.last_heard_ms) + " ago" : "–", "num");
        cell(tr, x.ejected ? "ejected" : x.draining ? "draining" : "ok",
             x.ejected ? "bad state" : x.draining ? "warn state" : "ok state");
    });
    text($("workers-note"), list.length ? "" : "no worker connected");
}

function showMethods(m) {
    const list = (m && m.methods) || [], now = performance.now();
    const calls = new Map();
    rows($("methods"), list, (tr, x) => {
        const key = `${x.service}\u0000${x.method}`;
        calls.set(key, x.calls);
        let rate = null;
        if (prevMethods && prevMethods.calls.has(key) && now > prevMethods.at)
            rate = Math.max(0, x.calls - prevMethods.calls.get(key)) / ((now - prevMethods.at) / 1000);
        cell(tr, x.service);
        cell(tr, x.method, "name");
        cell(tr, rate === null ? "–" : rate.toFixed(1), "num rate");
        cell(tr, x.calls, "num");
        cell(tr, x.errors, "num");
        cell(tr, x.timeouts, "num");
        cell(tr, num(x.p50_ms, 2), "num");
        cell(tr, num(x.p99_ms, 2), "num");
        cell(tr, x.workers, "num");
    });
    prevMethods = { at: now, calls };
    text($("methods-note"), m && list.length >= m.max_methods ? `first ${m.max_methods} methods; the rest count as other` : "");
}

async function poll() {
    const [s, w, m] = await Promise.allSettled(
        [getJson("/status"), getJson("/status/workers"), getJson("/status/methods")]);
    const live = $("live");
    if (s.status === "fulfilled") {
        polls++;
        text($("polls"), polls);
        showStatus(s.value);
        text(live, "live");
        live.className = "ok";
    } else {
        text(live, `broker unreachable (${s.reason.message})`);
        live.className = "bad";
    }
    if (w.status === "fulfilled")
        showWorkers(w.value);
    if (m.status === "fulfilled")
        showMethods(m.value);
}

async function loop() {
    try {
        await poll();
    } catch (e) {
        text($("live"), `error: ${e.message}`);
    }
    setTimeout(loop, 1000);
}

loop();
