/* UndoBench report: the pairs table (filters, pages) and the pair viewer.
   Inlined into report.html; reads the JSON in #ub-data and, lazily, the gzip chunks in
   #ub-chunks. No network: everything it needs is in the page. */
"use strict";
(function () {
  var t0 = performance.now();
  var DATA = JSON.parse(document.getElementById("ub-data").textContent);
  var COL = {};
  DATA.columns.forEach(function (c, i) { COL[c] = i; });
  var ROWS = DATA.rows;
  var PAGE = 100;
  var FILTER_COLS = ["workflow", "method", "boundary", "model", "scenario", "control", "fault", "harms"];
  var state = { filters: {}, q: "", page: 0, matched: [] };
  var chunkCache = {};
  var chunkText = null;

  function esc(v) {
    return String(v === null || v === undefined ? "–" : v)
      .replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
  }
  function tag(cls, text) { return '<span class="tag ' + cls + '">' + esc(text) + "</span>"; }
  function key(v) { return v === null || v === undefined ? "(none)" : String(v); }

  /* ---- filters ---- */
  function facets() {
    var out = {};
    FILTER_COLS.forEach(function (c) { out[c] = {}; });
    ROWS.forEach(function (r) {
      FILTER_COLS.forEach(function (c) {
        var v = r[COL[c]];
        if (c === "harms") {
          if (!v.length) out[c]["none"] = (out[c]["none"] || 0) + 1;
          v.forEach(function (h) { out[c][h] = (out[c][h] || 0) + 1; });
        } else {
          out[c][key(v)] = (out[c][key(v)] || 0) + 1;
        }
      });
    });
    return out;
  }
  function fillSelects() {
    var f = facets();
    document.querySelectorAll("#filters select").forEach(function (sel) {
      var c = sel.dataset.col;
      var names = Object.keys(f[c]).sort();
      var html = '<option value="">any</option>';
      names.forEach(function (n) {
        html += '<option value="' + esc(n) + '">' + esc(n) + " (" + f[c][n] + ")</option>";
      });
      sel.innerHTML = html;
      sel.addEventListener("change", function () {
        state.filters[c] = sel.value;
        state.page = 0;
        apply();
      });
    });
  }
  function matches(r) {
    for (var c in state.filters) {
      var want = state.filters[c];
      if (!want) continue;
      var v = r[COL[c]];
      if (c === "harms") {
        if (want === "none" ? v.length : v.indexOf(want) < 0) return false;
      } else if (key(v) !== want) return false;
    }
    return !state.q || String(r[COL.pair_id]).indexOf(state.q) >= 0;
  }
  function apply() {
    var m = [];
    for (var i = 0; i < ROWS.length; i++) if (matches(ROWS[i])) m.push(i);
    state.matched = m;
    renderTable();
    writeHash();
  }
  function setFilter(c, v) {
    state.filters[c] = v;
    var sel = document.querySelector('#filters select[data-col="' + c + '"]');
    if (sel) sel.value = v;
  }

  /* ---- table ---- */
  function renderTable() {
    var m = state.matched;
    var pages = Math.max(1, Math.ceil(m.length / PAGE));
    state.page = Math.min(state.page, pages - 1);
    var start = state.page * PAGE;
    var html = "";
    for (var k = start; k < Math.min(start + PAGE, m.length); k++) {
      var i = m[k], r = ROWS[i];
      html += '<tr data-i="' + i + '"><td><code>' + esc(r[COL.pair_id]) + "</code></td><td>" +
        esc(r[COL.workflow]) + "</td><td>" + esc(r[COL.scenario]) + "</td><td>" + esc(r[COL.boundary]) +
        "</td><td>" + esc(r[COL.method]) + "</td><td>" + esc(r[COL.model]) + "</td><td>" + esc(r[COL.seed]) +
        "</td><td>" + tag("o-" + r[COL.control], r[COL.control]) + "</td><td>" + tag("o-" + r[COL.fault], r[COL.fault]) +
        "</td><td>" + r[COL.harms].map(function (h) { return tag("h-" + h, h); }).join("") +
        "</td><td>" + esc(r[COL.as_planned]) + "</td></tr>";
    }
    document.querySelector("#pair-table tbody").innerHTML = html;
    document.getElementById("match").textContent =
      m.length + " of " + ROWS.length + " pairs match" + (m.length ? " · showing " + (start + 1) + "–" + Math.min(start + PAGE, m.length) : "");
    document.getElementById("page").textContent = "page " + (state.page + 1) + " of " + pages;
    document.getElementById("prev").disabled = state.page === 0;
    document.getElementById("next").disabled = state.page >= pages - 1;
  }

  /* ---- URL hash: filters and the open pair, so a view can be linked ---- */
  function writeHash() {
    var parts = [];
    for (var c in state.filters) if (state.filters[c]) parts.push(c + "=" + encodeURIComponent(state.filters[c]));
    if (state.q) parts.push("q=" + encodeURIComponent(state.q));
    if (state.open) parts.push("pair=" + encodeURIComponent(state.open));
    history.replaceState(null, "", parts.length ? "#" + parts.join("&") : location.pathname + location.search);
  }
  function readHash() {
    var pair = null;
    location.hash.replace(/^#/, "").split("&").forEach(function (kv) {
      if (!kv) return;
      var p = kv.split("="), k = p[0], v = decodeURIComponent(p.slice(1).join("="));
      if (k === "pair") pair = v;
      else if (k === "q") { state.q = v; document.getElementById("q").value = v; }
      else if (FILTER_COLS.indexOf(k) >= 0) setFilter(k, v);
    });
    return pair;
  }

  /* ---- pair details: gzip chunks, inflated on first use ---- */
  function chunk(n) {
    if (!chunkCache[n]) {
      if (chunkText === null) chunkText = JSON.parse(document.getElementById("ub-chunks").textContent);
      var bin = atob(chunkText[n]);
      var bytes = new Uint8Array(bin.length);
      for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
      var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
      chunkCache[n] = new Response(stream).text().then(JSON.parse);
    }
    return chunkCache[n];
  }
  function detail(i) {
    return chunk(Math.floor(i / DATA.chunk)).then(function (list) { return list[i % DATA.chunk]; });
  }

  /* ---- the pair viewer ---- */
  function cell(c) {
    if (!c) return '<td class="cell empty"></td>';
    var cls = "cell" + (c.fault ? " fault-step" : "") + c.harm.map(function (h) { return " harm-" + h; }).join("");
    var html = '<td class="' + cls + '"' + (c.fault ? ' data-testid="fault-step"' : "") + ">";
    if (c.fault) html += '<span class="fault-mark">⚡ FAULT</span> ';
    if (c.who !== "agent") html += '<span class="who who-' + esc(c.who) + '" title="made by the recovery wrapper, not the agent">' + esc(c.who) + "</span>";
    c.harm.forEach(function (h) { html += tag("h-" + h, h); });
    html += '<div class="a">' + esc(c.a) + "</div>";
    html += '<div class="o">' + (c.fault ? "agent saw: " : "") + esc(c.o) + "</div>";
    if (c.w) html += '<div class="w">wire: ' + esc(c.w) + "</div>";
    return html + "</td>";
  }
  function commits(rows, side) {
    if (!rows.length) return '<p class="meta">nothing committed</p>';
    var html = '<table class="rates" data-side="' + side + '"><thead><tr><th>#</th><th>op</th><th>identity</th><th>key</th><th>harm</th></tr></thead><tbody>';
    rows.forEach(function (r) {
      html += '<tr class="' + r.harm.map(function (h) { return "harm-" + h; }).join(" ") + '"><td>' + esc(r.seq) + "</td><td>" + esc(r.op) +
        (r.comp ? ' <span class="who who-compensation">compensation</span>' : "") + "</td><td><code>" + esc(r.identity) + "</code></td><td>" +
        esc(r.key) + "</td><td>" + r.harm.map(function (h) { return tag("h-" + h, h); }).join("") + "</td></tr>";
    });
    return html + "</tbody></table>";
  }
  function verdict(v, side) {
    if (!v || !v.outcome) return "";
    var html = '<div class="panel" data-verdict="' + side + '"><h4>' + side + " verdict: " + tag("o-" + v.outcome, v.outcome) + "</h4>";
    html += '<p class="meta">finish status ' + esc(v.finish_status) + (v.error ? " · error " + esc(v.error) : "") + "</p>";
    if (v.effects) {
      html += '<p class="meta">effects: ' + Object.keys(v.effects).map(function (k) { return esc(k) + " " + esc(v.effects[k]); }).join(", ") + "</p>";
    }
    var harms = Object.keys(v.harms || {});
    if (!harms.length) html += "<p>no harm</p>";
    harms.forEach(function (h) {
      html += '<div class="harm-list" data-harm="' + esc(h) + '">' + tag("h-" + h, h) + '<ul class="harms">' +
        v.harms[h].map(function (x) { return "<li>" + esc(x) + "</li>"; }).join("") + "</ul></div>";
    });
    return html + "</div>";
  }
  function diff(d) {
    var html = '<div class="panel"><h4>Final state: fault vs control</h4><p>' +
      (d.same_state === null ? "state hashes not recorded" : d.same_state ? "same final state (hash)" : "<b>different final state</b> (hash)") + "</p>";
    if (d.effects.length) {
      html += '<table class="rates"><thead><tr><th>committed effect</th><th>control</th><th>fault</th></tr></thead><tbody>';
      d.effects.forEach(function (e) { html += "<tr><td><code>" + esc(e.effect) + '</code></td><td class="num">' + e.control + '</td><td class="num">' + e.fault + "</td></tr>"; });
      html += "</tbody></table>";
    } else html += '<p class="meta">the same committed effects</p>';
    if (d.invariants.length) {
      html += '<table class="rates"><thead><tr><th>invariant</th><th>expected</th><th>control</th><th>fault</th></tr></thead><tbody>';
      d.invariants.forEach(function (x) {
        html += "<tr><td>" + esc(x.description) + "</td><td>" + esc(x.expected) + "</td><td>" + esc(x.control) + "</td><td" + (x.passed ? "" : ' class="h-duplicate"') + ">" + esc(x.fault) + "</td></tr>";
      });
      html += "</tbody></table>";
    }
    return html + "</div>";
  }
  function renderPair(d) {
    var h = d.head, fp = d.fault_point;
    var html = '<p class="meta">' + ["workflow", "scenario", "boundary", "domain", "seed", "method", "model", "agent", "prefix_equivalent", "method_applicable"]
      .map(function (k) { return esc(k) + " <b>" + esc(h[k]) + "</b>"; }).join(" · ") + "</p>";
    html += '<p class="legend meta"><span class="fault-mark">⚡ FAULT</span> the call the fault hit · <span class="who who-retry">retry</span><span class="who who-probe">probe</span><span class="who who-compensation">compensation</span> calls the recovery wrapper made · ' +
      ["duplicate", "unrequired", "forbidden"].map(function (x) { return tag("h-" + x, x); }).join("") + " where a harm was committed · green rows: the shared prefix</p>";
    if (fp) {
      html += '<div class="fault-point" data-testid="fault-point"><b>Fault point</b>' + (fp.step ? " (fault episode step " + esc(fp.step) + ")" : " (the fault did not hit a call)") +
        "<dl><dt>what the agent saw</dt><dd>" + esc(fp.saw) + "</dd><dt>what happened on the wire</dt><dd>" + esc(fp.wire) +
        "</dd><dt>in the commit log</dt><dd>" + (fp.committed === true ? "the service committed the call" : fp.committed === false ? "nothing committed by this call" : "not in the fault record: see the commit log below") +
        "</dd><dt>fault record</dt><dd>" + esc(fp.record) + "</dd><dt>as planned</dt><dd>" + esc(fp.outcome ? JSON.stringify(fp.outcome) : null) + "</dd></dl></div>";
    }
    html += '<div class="panels">' + verdict(d.verdict.control, "control") + verdict(d.verdict.fault, "fault") + "</div>";
    if (!d.transcripts) html += "<p>(no transcripts recorded: an imported reference row)</p>";
    else {
      html += '<h3>Steps</h3><table class="steps"><thead><tr><th class="n">#</th><th>control episode</th><th>fault episode</th></tr></thead><tbody>';
      var n = Math.max(d.control.length, d.fault.length);
      for (var i = 0; i < n; i++) {
        var cls = (i < d.shared ? "shared" : "") + (i === d.shared && i > 0 ? " diverge" : "");
        html += '<tr class="' + cls + '"><td class="n">' + (i + 1) + "</td>" + cell(d.control[i]) + cell(d.fault[i]) + "</tr>";
      }
      html += "</tbody></table>";
      html += '<p class="meta">' + d.shared + " shared step(s) before the episodes diverge.</p>";
    }
    html += '<h3>Commit logs</h3><div class="panels"><div class="panel"><h4>control</h4>' + commits(d.commits.control, "control") +
      '</div><div class="panel"><h4>fault</h4>' + commits(d.commits.fault, "fault") + "</div></div>";
    html += "<h3>Difference</h3>" + diff(d.diff);
    return html;
  }
  function openPair(i) {
    var id = ROWS[i][COL.pair_id];
    state.open = id;
    writeHash();
    return detail(i).then(function (d) {
      var v = document.getElementById("viewer");
      document.getElementById("v-title").textContent = id;
      document.getElementById("v-body").innerHTML = renderPair(d);
      v.hidden = false;
      v.dataset.pair = id;
      v.scrollIntoView();
    });
  }

  /* ---- wiring ---- */
  fillSelects();
  var q = document.getElementById("q");
  q.addEventListener("input", function () { state.q = q.value.trim(); state.page = 0; apply(); });
  document.getElementById("prev").addEventListener("click", function () { state.page--; renderTable(); });
  document.getElementById("next").addEventListener("click", function () { state.page++; renderTable(); });
  document.getElementById("reset").addEventListener("click", function () {
    FILTER_COLS.forEach(function (c) { setFilter(c, ""); });
    state.q = ""; q.value = ""; state.page = 0; apply();
  });
  document.getElementById("preset-dup").addEventListener("click", function () {
    FILTER_COLS.forEach(function (c) { setFilter(c, ""); });
    setFilter("control", "succeeded");
    setFilter("harms", "duplicate");
    state.page = 0; apply();
  });
  document.getElementById("v-close").addEventListener("click", function () {
    document.getElementById("viewer").hidden = true; state.open = null; writeHash();
  });
  document.querySelector("#pair-table tbody").addEventListener("click", function (e) {
    var tr = e.target.closest("tr[data-i]");
    if (tr) openPair(+tr.dataset.i);
  });
  var wanted = readHash();
  apply();
  var ready = function () {
    document.body.dataset.ready = "1";
    document.body.dataset.readyMs = String(Math.round(performance.now() - t0));
    // from navigation start (the page's time origin): what a user waits for
    document.body.dataset.readyAt = String(Math.round(performance.now()));
  };
  if (wanted) {
    var at = -1;
    for (var i = 0; i < ROWS.length; i++) if (ROWS[i][COL.pair_id] === wanted) { at = i; break; }
    if (at >= 0) openPair(at).then(ready, ready); else ready();
  } else ready();
})();
