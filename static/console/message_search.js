// Message search: pages the search through /api/messages/search in bounded steps (each
// one a plain GET resuming at the previous step's offsets), so the operator sees
// progress, can stop, and can continue past the bound. Rows are built with textContent.
(function () {
  "use strict";
  const form = document.getElementById("search-form");
  if (!form) return;
  const STEP = 2000; // records scanned per request
  const $ = (id) => document.getElementById(id);
  const tbody = document.querySelector("#search-results tbody");
  let run = null;

  function ts(ms) {
    if (ms == null || ms < 0) return "—";
    return new Date(ms).toISOString().replace("T", " ");
  }

  function cell(text, cls, pre) {
    const td = document.createElement("td");
    if (cls) td.className = cls;
    if (pre) {
      const p = document.createElement("pre");
      p.className = "val " + pre;
      p.textContent = text;
      td.appendChild(p);
    } else {
      td.textContent = text;
    }
    return td;
  }

  // a key or value: decoded JSON with its schema badge (raw bytes folded below), or the
  // raw text with the reason it could not be decoded (see templates/console/_payload.html)
  function payload(raw, enc, d, cls) {
    const td = cell(raw == null ? "null" : raw, cls, "enc-" + enc);
    if (!d) return td;
    const badge = document.createElement("span");
    badge.className = "pill schema-badge " + (d.error ? "warn" : "ok");
    badge.textContent = d.badge;
    if (d.error) {
      const why = document.createElement("span");
      why.className = "schema-error txt-warn";
      why.textContent = " " + d.error;
      td.prepend(badge, why);
      return td;
    }
    const rawPre = td.firstChild;
    const details = document.createElement("details");
    details.className = "raw";
    const summary = document.createElement("summary");
    summary.className = "muted";
    summary.textContent = "raw bytes";
    details.append(summary, rawPre);
    const pre = document.createElement("pre");
    pre.className = "val decoded";
    pre.textContent = d.json;
    td.append(badge, pre, details);
    return td;
  }

  function addRow(r) {
    const tr = document.createElement("tr");
    tr.dataset.partition = r.partition;
    tr.dataset.offset = r.offset;
    tr.append(
      cell(String(r.partition), "n"),
      cell(String(r.offset), "n"),
      cell(ts(r.timestamp), "mono"),
      payload(r.key, r.key_encoding, r.key_schema, ""),
      payload(r.value, r.value_encoding, r.value_schema, "wrap"),
      cell(r.headers.length ? r.headers.map((h) => h[0] + "=" + h[1]).join("\n") : "—", "mono"),
      cell(r.size.toLocaleString("en"), "n"),
    );
    tbody.appendChild(tr);
  }

  function params(extra) {
    const q = new URLSearchParams(new FormData(form));
    for (const [k, v] of Object.entries(extra || {})) q.set(k, v);
    return q;
  }

  function status(text, percent) {
    $("search-progress").hidden = false;
    $("search-status").textContent = text;
    $("search-bar").style.width = Math.min(100, percent) + "%";
  }

  function showError(body) {
    form.querySelectorAll(".field-error").forEach((e) => e.remove());
    form.querySelectorAll(".err").forEach((e) => e.classList.remove("err"));
    const div = document.createElement("div");
    div.className = "field-error";
    div.id = "search-error";
    div.textContent = body.detail || "The search failed.";
    form.appendChild(div);
    for (const name of Object.keys(body.errors || {})) {
      const input = form.elements[name];
      if (input) input.classList.add("err");
    }
  }

  async function go(resume, fresh) {
    const bound = parseInt(form.elements.max_scanned.value, 10) || 10000;
    const budget = parseInt(form.elements.max_ms.value, 10) || 5000;
    const wanted = parseInt(form.elements.max_results.value, 10) || 200;
    if (fresh) {
      tbody.textContent = "";
      run = { perPart: {}, scanned: 0, matched: 0 };
    }
    run.stop = false;
    run.resume = resume;
    status("Searching…", 0);
    const started = Date.now();
    const pass = { scanned: 0, matched: 0 };
    $("search-stop").hidden = false;
    $("search-continue").hidden = true;
    $("search-error") && $("search-error").remove();
    let data = null;
    let why = null;
    for (;;) {
      const left = bound - pass.scanned;
      const ms = budget - (Date.now() - started);
      const extra = {
        max_scanned: Math.min(STEP, left),
        max_ms: Math.max(1, Math.min(budget, ms)),
        max_results: Math.max(1, wanted - pass.matched),
      };
      if (run.resume) extra.resume = run.resume;
      const res = await fetch(form.dataset.api + "?" + params(extra), {
        headers: { Accept: "application/json" },
        credentials: "same-origin",
      });
      const body = await res.json().catch(() => ({ detail: "HTTP " + res.status }));
      if (!res.ok) {
        showError(body);
        why = "error";
        break;
      }
      data = body;
      data.records.forEach(addRow);
      pass.scanned += data.scanned;
      pass.matched += data.matched;
      run.scanned += data.scanned;
      run.matched += data.matched;
      for (const [p, n] of Object.entries(data.scanned_per_partition)) {
        run.perPart[p] = (run.perPart[p] || 0) + n;
      }
      run.resume = data.resume;
      $("search-parts").textContent = Object.entries(run.perPart)
        .map(([p, n]) => "p" + p + ": " + n.toLocaleString("en") + " scanned")
        .join(" · ");
      status(
        "Scanned " + run.scanned.toLocaleString("en") + " · matched " + run.matched.toLocaleString("en") + " …",
        (100 * pass.scanned) / bound,
      );
      if (!data.next) { why = "done"; break; }
      if (run.stop) { why = "stopped by you"; break; }
      if (pass.scanned >= bound) { why = "max_scanned"; break; }
      if (pass.matched >= wanted) { why = "max_results"; break; }
      if (Date.now() - started >= budget) { why = "max_ms"; break; }
    }
    $("search-stop").hidden = true;
    if (why === "error") return;
    if (!tbody.children.length) {
      const tr = document.createElement("tr");
      tr.className = "none";
      const td = cell("No record matched.", "muted");
      td.colSpan = 7;
      tr.appendChild(td);
      tbody.appendChild(tr);
    }
    const head = "Scanned " + run.scanned.toLocaleString("en") + " · matched " + run.matched.toLocaleString("en");
    if (why === "done") {
      status(head + " · done", 100);
    } else {
      status(head + " · stopped on " + why + "; resume at " + run.resume, (100 * pass.scanned) / bound);
      $("search-continue").hidden = false;
    }
    const dl = params();
    $("search-jsonl").href = form.dataset.download + "?" + dl + "&as=jsonl";
    $("search-csv").href = form.dataset.download + "?" + dl + "&as=csv";
    $("search-jsonl").hidden = $("search-csv").hidden = false;
  }

  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    go(null, true);
  });
  $("search-stop").addEventListener("click", () => { if (run) run.stop = true; });
  $("search-continue").addEventListener("click", () => {
    tbody.querySelectorAll("tr.none").forEach((e) => e.remove());
    go(run.resume, false);
  });
})();
