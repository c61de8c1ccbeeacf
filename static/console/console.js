// Quill console: sortable and filterable tables, and the live path. Pages carry
// data-k keys on the cells the monitor updates; a delta {"set": {key: {t, v, c}}}
// patches them in place, "events" prepend to the event feed, "refresh" re-fetches
// the page and swaps <main> (structure changed: a broker joined, a topic appeared).
(function () {
  "use strict";

  // ------------------------------------------------------------ tables
  function cellValue(td) {
    if (!td) return "";
    const raw = td.dataset.v !== undefined ? td.dataset.v : td.textContent.trim();
    const num = parseFloat(String(raw).replace(/,/g, ""));
    return raw !== "" && raw !== "—" && !isNaN(num) && /^-?[\d,.]+(e\d+)?$/.test(String(raw).replace(/\s.*/, "")) ? num : String(raw).toLowerCase();
  }

  function sortTable(th) {
    const table = th.closest("table");
    const index = Array.from(th.parentNode.children).indexOf(th);
    const asc = !th.classList.contains("asc");
    table.querySelectorAll("th").forEach((h) => h.classList.remove("asc", "desc"));
    th.classList.add(asc ? "asc" : "desc");
    for (const tbody of table.tBodies) {
      const groups = [];
      for (const row of Array.from(tbody.rows)) {
        if (row.classList.contains("sub") && groups.length) groups[groups.length - 1].push(row);
        else groups.push([row]);
      }
      groups.sort((a, b) => {
        const x = cellValue(a[0].cells[index]), y = cellValue(b[0].cells[index]);
        if (x === y) return 0;
        if (typeof x === "number" && typeof y === "number") return asc ? x - y : y - x;
        if (typeof x === "number") return asc ? -1 : 1;
        if (typeof y === "number") return asc ? 1 : -1;
        return asc ? (x < y ? -1 : 1) : (x < y ? 1 : -1);
      });
      for (const group of groups) for (const row of group) tbody.appendChild(row);
    }
  }

  function applyFilter(input) {
    const table = document.querySelector(input.dataset.filter);
    if (!table) return;
    const words = input.value.toLowerCase().split(/\s+/).filter(Boolean);
    let shown = 0;
    for (const tbody of table.tBodies) {
      let keep = true;
      for (const row of tbody.rows) {
        if (!row.classList.contains("sub")) {
          const text = row.textContent.toLowerCase();
          keep = words.every((w) => text.includes(w));
          if (keep) shown++;
        }
        row.classList.toggle("hidden", !keep);
      }
    }
    const count = document.querySelector(input.dataset.count || "#none");
    if (count) count.textContent = shown;
  }

  document.addEventListener("click", (e) => {
    const th = e.target.closest("th[data-sort]");
    if (th) sortTable(th);
  });
  // data-confirm on a form or a submit button asks before submitting (no inline
  // handlers: the Content-Security-Policy allows scripts from /static/ only).
  document.addEventListener("submit", (e) => {
    const asking = (e.submitter && e.submitter.closest("[data-confirm]")) || e.target.closest("form[data-confirm]");
    if (asking && !window.confirm(asking.dataset.confirm)) e.preventDefault();
  });
  document.addEventListener("input", (e) => {
    if (e.target.matches("input[data-filter]")) applyFilter(e.target);
  });

  // ------------------------------------------------------------ live cells
  let index = new Map();
  function reindex() {
    index = new Map();
    document.querySelectorAll("[data-k]").forEach((el) => {
      const key = el.dataset.k;
      if (!index.has(key)) index.set(key, []);
      index.get(key).push(el);
    });
  }

  // A cell of badges: {"s": [[text, class], ...]} becomes <span class>text</span>...,
  // built with textContent (a delta is data, never markup).
  function setSpans(el, spans) {
    while (el.firstChild) el.removeChild(el.firstChild);
    for (const [text, cls] of spans) {
      const span = document.createElement("span");
      span.className = String(cls);
      span.textContent = String(text);
      el.appendChild(span);
    }
  }

  // A list: {"l": [text, ...]} becomes its <li> items.
  function setItems(el, items) {
    while (el.firstChild) el.removeChild(el.firstChild);
    for (const text of items) {
      const li = document.createElement("li");
      li.textContent = String(text);
      el.appendChild(li);
    }
  }

  // A bar: {"w": percent} sets the width of its .fill (through the CSSOM).
  function setWidth(el, percent) {
    const fill = el.querySelector(".fill");
    const width = Math.max(0, Math.min(100, Number(percent) || 0)) + "%";
    if (!fill || fill.style.width === width) return false;
    fill.style.width = width;
    return true;
  }

  function patch(key, cell) {
    const els = index.get(key);
    if (!els) return 0;
    for (const el of els) {
      const text = cell.t !== undefined ? String(cell.t) : el.textContent;
      if (cell.w !== undefined) {
        setWidth(el, cell.w);
        continue;
      }
      if (cell.l !== undefined) setItems(el, cell.l);
      else if (cell.s !== undefined) setSpans(el, cell.s);
      else if (el.textContent !== text) el.textContent = text;
      else if (cell.c === undefined) continue;
      if (cell.v !== undefined) el.dataset.v = cell.v;
      if (cell.c !== undefined) {
        el.className = el.className.replace(/\b(ok|warn|err|muted|txt-\w+)\b/g, "").trim();
        if (cell.c) el.classList.add(...cell.c.split(" "));
      }
      el.classList.remove("flash");
      void el.offsetWidth; // restart the animation
      el.classList.add("flash");
    }
    return els.length;
  }

  function addEvents(events) {
    const feed = document.getElementById("events");
    if (!feed || !feed.tBodies.length) return;
    const body = feed.tBodies[0];
    const topic = feed.dataset.topic;
    for (const ev of events) {
      if (topic && ev.topic !== topic) continue;
      const tr = document.createElement("tr");
      tr.className = "flash";
      const when = new Date(ev.ts).toISOString().replace("T", " ").slice(0, 23) + "Z";
      for (const [text, cls] of [[when, "mono"], [ev.kind, "pill " + (ev.level || "muted")], [ev.text, "wrap"]]) {
        const td = document.createElement("td");
        if (cls.startsWith("pill")) {
          const span = document.createElement("span");
          span.className = cls;
          span.textContent = text;
          td.appendChild(span);
        } else {
          td.className = cls;
          td.textContent = text;
        }
        tr.appendChild(td);
      }
      body.insertBefore(tr, body.firstChild);
      const empty = body.querySelector("tr.empty");
      if (empty) empty.remove();
      while (body.rows.length > 500) body.deleteRow(-1);
    }
  }

  let refreshing = false;
  async function refresh() {
    if (refreshing) return;
    refreshing = true;
    try {
      const response = await fetch(location.href, { headers: { "X-Quill-Live": "1" }, credentials: "same-origin" });
      if (!response.ok) return;
      const doc = new DOMParser().parseFromString(await response.text(), "text/html");
      const fresh = doc.getElementById("live-root"), old = document.getElementById("live-root");
      if (!fresh || !old) return;
      const active = document.activeElement && document.activeElement.closest("#live-root form");
      if (active) return; // never replace a form someone is typing in
      const filters = {};
      old.querySelectorAll("input[data-filter]").forEach((i) => (filters[i.dataset.filter] = i.value));
      old.replaceWith(fresh);
      const box = document.getElementById("tail-toggle");
      if (box && tail) box.checked = true;
      fresh.querySelectorAll("input[data-filter]").forEach((i) => {
        if (filters[i.dataset.filter]) { i.value = filters[i.dataset.filter]; applyFilter(i); }
      });
      reindex();
      drawCharts();
    } finally {
      refreshing = false;
    }
  }

  // ------------------------------------------------------------ charts (inline SVG)
  function drawChart(svg, points) {
    const W = svg.clientWidth || 600, H = svg.clientHeight || 160, L = 56, B = 18, T = 8, R = 8;
    const ns = "http://www.w3.org/2000/svg";
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    const add = (name, attrs, text) => {
      const el = document.createElementNS(ns, name);
      for (const k in attrs) el.setAttribute(k, attrs[k]);
      if (text !== undefined) el.textContent = text;
      svg.appendChild(el);
      return el;
    };
    if (!points.length) {
      add("text", { x: L, y: H / 2 }, svg.dataset.empty || "No lag samples yet (the monitor records one a second).");
      return;
    }
    const t0 = points[0][0], t1 = Math.max(points[points.length - 1][0], t0 + 60);
    const ymax = Math.max(1, ...points.map((p) => p[1]));
    const x = (t) => L + ((t - t0) / (t1 - t0)) * (W - L - R);
    const y = (v) => H - B - (v / ymax) * (H - B - T);
    for (let i = 0; i <= 4; i++) {
      const v = (ymax * i) / 4, yy = y(v);
      add("line", { x1: L, x2: W - R, y1: yy, y2: yy, class: "grid" });
      const label = ymax < 10 ? v.toFixed(1) : Math.round(v).toLocaleString();
      add("text", { x: L - 6, y: yy + 3, "text-anchor": "end" }, label);
    }
    for (let i = 0; i <= 4; i++) {
      const t = t0 + ((t1 - t0) * i) / 4;
      const anchor = i === 0 ? "start" : i === 4 ? "end" : "middle";
      add("text", { x: x(t), y: H - 4, "text-anchor": anchor }, new Date(t * 1000).toISOString().slice(11, 19));
    }
    const d = points.map((p, i) => (i ? "L" : "M") + x(p[0]).toFixed(1) + " " + y(p[1]).toFixed(1)).join(" ");
    add("path", { d: d + ` L${x(points[points.length - 1][0]).toFixed(1)} ${H - B} L${x(t0).toFixed(1)} ${H - B} Z`, class: "area" });
    add("path", { d, class: "line" });
    add("line", { x1: L, x2: L, y1: T, y2: H - B, class: "axis" });
    add("line", { x1: L, x2: W - R, y1: H - B, y2: H - B, class: "axis" });
  }

  const series = {};
  function drawCharts() {
    document.querySelectorAll("svg.chart[data-series]").forEach((svg) => {
      const name = svg.dataset.series;
      if (!series[name]) {
        const src = document.getElementById(svg.dataset.source);
        const data = src ? JSON.parse(src.textContent) : [];
        series[name] = Array.isArray(data) ? data : data[name] || []; // one series, or by name
      }
      drawChart(svg, series[name]);
    });
  }

  function extendSeries(updates) {
    for (const name in updates) {
      const list = (series[name] = series[name] || []);
      list.push(...updates[name]);
      const cutoff = list[list.length - 1][0] - 3600;
      while (list.length && list[0][0] < cutoff) list.shift();
    }
    drawCharts();
  }

  // ------------------------------------------------------------ live tail (Messages)
  // The toggle asks the socket for {"tail": {topic, partition, format}}; new records
  // arrive as {"tail_records": {records: [...]}} and are appended, the last 500 kept.
  const TAIL_ROWS = 500;
  let socket = null, tail = null;

  function tailState(text, cls) {
    const el = document.getElementById("tail-state");
    if (!el) return;
    el.textContent = text;
    el.className = cls || "muted";
  }

  function sendTail() {
    if (!socket || socket.readyState !== WebSocket.OPEN) return;
    socket.send(JSON.stringify(tail ? { tail } : { untail: true }));
  }

  function toggleTail(box) {
    tail = box.checked
      ? { topic: box.dataset.topic, partition: Number(box.dataset.partition), format: box.dataset.format }
      : null;
    tailState(tail ? "starting…" : "");
    sendTail();
  }

  function appendTail(batch) {
    const table = document.getElementById("records");
    if (!tail || !table || batch.topic !== tail.topic || batch.partition !== tail.partition) return;
    const body = table.tBodies[0];
    const empty = body.querySelector("td[colspan]");
    if (empty) empty.parentNode.remove();
    for (const r of batch.records) {
      const tr = document.createElement("tr");
      tr.className = "flash";
      tr.dataset.offset = r.offset;
      const cell = (text, cls, pre) => {
        const td = document.createElement("td");
        if (cls) td.className = cls;
        if (pre) {
          const el = document.createElement("pre");
          el.className = "val";
          el.textContent = text;
          td.appendChild(el);
        } else td.textContent = text;
        tr.appendChild(td);
        return td;
      };
      cell(String(r.offset), "n");
      cell(r.ts_text, "mono").title = r.timestamp_type;
      cell(r.key === null ? "null" : r.key, "", true);
      cell(r.value === null ? "null" : r.value, "wrap", true);
      const headers = cell("", "mono");
      if (!r.headers.length) headers.textContent = "—";
      r.headers.forEach(([k, v], i) => {
        if (i) headers.appendChild(document.createElement("br"));
        headers.appendChild(document.createTextNode(`${k}=${v === null ? "null" : v}`));
      });
      cell(r.size.toLocaleString("en-US"), "n");
      body.appendChild(tr);
    }
    while (body.rows.length > TAIL_ROWS) body.deleteRow(0);
    const filter = document.querySelector('input[data-filter="#records"]');
    if (filter && filter.value) applyFilter(filter);
    const last = batch.records[batch.records.length - 1];
    tailState(`live: up to offset ${last.offset.toLocaleString("en-US")}`, "txt-ok");
  }

  document.addEventListener("change", (e) => {
    if (e.target.id === "tail-toggle") toggleTail(e.target);
  });

  // ------------------------------------------------------------ websocket
  const dot = document.getElementById("livedot");
  function setState(state, title) {
    if (!dot) return;
    dot.dataset.state = state;
    dot.textContent = state;
    dot.title = title || "";
  }

  function connect(subs, attempt) {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const ws = new WebSocket(`${scheme}://${location.host}/ws/live/?subs=${encodeURIComponent(subs)}&cluster=${encodeURIComponent(document.body.dataset.cluster || "")}`);
    setState("connecting");
    socket = ws;
    ws.onopen = () => {
      attempt = 0;
      setState("live", "Updates arrive as they happen.");
      if (tail) sendTail(); // resume a tail after a reconnect (from the new end)
    };
    ws.onmessage = (msg) => {
      const data = JSON.parse(msg.data);
      if (data.hello) return;
      if (data.tail_records) return appendTail(data.tail_records);
      if (data.tail !== undefined) {
        if (data.tail) tailState(`live from offset ${data.tail.from.toLocaleString("en-US")}`, "txt-ok");
        return;
      }
      if (data.tail_error) {
        tailState(data.tail_error.message, "txt-err");
        return;
      }
      window.quillLastDelta = { at: Date.now(), data };
      if (data.set) for (const key in data.set) patch(key, data.set[key]);
      if (data.events) addEvents(data.events);
      if (data.series) extendSeries(data.series);
      if (data.refresh) refresh();
    };
    ws.onclose = (e) => {
      if (e.code === 4401 || e.code === 4403) { setState("offline", "Not allowed: log in again."); return; }
      setState("offline", "Reconnecting…");
      setTimeout(() => connect(subs, attempt + 1), Math.min(10000, 500 * 2 ** attempt));
    };
  }

  document.addEventListener("DOMContentLoaded", () => {
    reindex();
    drawCharts();
    document.querySelectorAll("input[data-filter]").forEach((i) => i.value && applyFilter(i));
    const subs = document.body.dataset.live;
    if (subs) connect(subs, 0);
    else setState("static", "This page has no live data.");
  });
  window.quill = { patch, refresh, reindex };
})();
