// The scenario player (actors/mast/timeline/page.py). Names from the run are
// put in the page with textContent or SVG text nodes only, never as markup.
"use strict";
(function () {
  const D = JSON.parse(document.getElementById("data").textContent);
  const SEP = D.sep;
  const steps = D.steps;
  const N = steps.length;
  const END = Math.max(D.meta.end_us, N ? steps[N - 1][0] : 0, 1);
  const SPEEDS = [1, 10, 60, 300, 900, 3600, 14400];
  const PRIORITY_COLOURS = ["#b71c1c", "#e65100", "#f9a825", "#2e7d32", "#00838f", "#1565c0", "#6a1b9a", "#5d4037"];
  const FREE = "#d7dbe0", DOWN = "#222", CPU_BUSY = "#78909c";
  const QUEUED = new Set(["PENDING", "WAITING", "WAITING_DATA"]);

  let S = {};          // tables after step `pos`
  let pos = -1;        // -1: before the first step
  let T = 0;           // the cursor's emulated time (µs)
  let playing = false, speedIndex = 3, lastFrame = 0, renderQueued = false;
  let changedRoles = new Set();

  const $ = (id) => document.getElementById(id);
  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  const SVGNS = "http://www.w3.org/2000/svg";
  function svg(tag, attrs, text) {
    const e = document.createElementNS(SVGNS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = String(text);
    return e;
  }
  function clear(e) { while (e.firstChild) e.removeChild(e.firstChild); }
  function fmt(us) {
    const ms = Math.floor(us / 1000), s = Math.floor(ms / 1000);
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
    return h + ":" + String(m).padStart(2, "0") + ":" + String(s % 60).padStart(2, "0") + "." + String(ms % 1000).padStart(3, "0");
  }
  function fmtBytes(n) {
    const u = ["B", "KB", "MB", "GB", "TB", "PB"];
    let i = 0;
    while (n >= 1000 && i < u.length - 1) { n /= 1000; i++; }
    return n.toFixed(n < 10 && i ? 1 : 0) + " " + u[i];
  }

  // ---- state: snapshots and deltas -------------------------------------------------------
  function apply(i) {
    for (const [table, key, fields] of D.deltas[i]) {
      const rows = S[table] || (S[table] = {});
      if (fields === null) delete rows[key];
      else rows[key] = Object.assign({}, rows[key], fields);
    }
  }
  function seek(p) {
    // The last snapshot at or before p, then at most SNAPSHOT_EVERY steps' changes.
    let lo = 0, hi = D.snapshots.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (D.snapshots[mid][0] <= p) lo = mid; else hi = mid - 1;
    }
    const [at, tables] = D.snapshots[lo];
    S = {};
    for (const t in tables) S[t] = Object.assign({}, tables[t]);
    for (let i = at + 1; i <= p; i++) apply(i);
    pos = p;
  }
  function goTo(p, keepTime) {
    p = Math.max(-1, Math.min(N - 1, p));
    changedRoles = new Set();
    if (p > pos && p - pos <= 64) { for (let i = pos + 1; i <= p; i++) apply(i); pos = p; }
    else seek(p);
    if (!keepTime) T = p >= 0 ? steps[p][0] : 0;
    if (p >= 0) for (const [table, key] of D.deltas[p]) if (table === "leases") changedRoles.add(key);
    queueRender();
  }
  function stepAtTime(t) {
    // The last step at or before t.
    let lo = -1, hi = N - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (steps[mid][0] <= t) lo = mid; else hi = mid - 1;
    }
    return lo;
  }
  function findStep(from, dir, test) {
    for (let i = from + dir; i >= 0 && i < N; i += dir) if (test(i)) return i;
    return -1;
  }
  const isCat = (c) => (i) => steps[i][1] === c;
  const isLeaderChange = (i) => D.deltas[i].some((d) => d[0] === "leases");
  function jump(test, dir) {
    const i = findStep(pos, dir, test);
    if (i >= 0) { playing = false; goTo(i); }
  }

  // ---- rendering ------------------------------------------------------------------------
  function queueRender() {
    if (!renderQueued) { renderQueued = true; requestAnimationFrame(render); }
  }
  function render() {
    renderQueued = false;
    $("clock").textContent = fmt(T);
    $("position").textContent = "event " + (pos + 1) + " / " + N;
    $("b-play").textContent = playing ? "pause" : "play";
    renderWorld();
    renderRoles();
    renderQueue();
    renderAuctions();
    renderWan();
    renderLog();
    renderCursor();
    const hash = "#s=" + pos;
    if (location.hash !== hash) history.replaceState(null, "", hash);
  }

  function regionsOf() {
    const regions = {};
    for (const host in D.meta.machines) regions[D.meta.machines[host][0]] = true;
    for (const c in (S.clusters || {})) regions[S.clusters[c].region] = true;
    return Object.keys(regions).sort();
  }
  function heldGpus() {
    // host -> [[gpus, priority], ...] and host -> busy (a CPU machine held whole)
    const gpus = {}, cpu = {};
    for (const key in (S.allocations || {})) {
      const [host, wid] = key.split(SEP);
      const a = S.allocations[key];
      const w = (S.workloads || {})[wid];
      const prio = w ? w.priority : 7;
      if (a.c) cpu[host] = true;
      if (a.g) (gpus[host] || (gpus[host] = [])).push([a.g, prio]);
    }
    return [gpus, cpu];
  }
  function renderWorld() {
    const world = $("world");
    clear(world);
    const down = S.down || {};
    const [gpus, cpu] = heldGpus();
    const byCluster = {};
    for (const host in (S.machines || {})) {
      const c = S.machines[host].cluster;
      if (c !== null && c !== undefined) (byCluster[c] || (byCluster[c] = [])).push(host);
    }
    for (const region of regionsOf()) {
      const box = el("div", null, "region");
      box.dataset.region = region;
      const title = el("h3", region);
      if (down[region]) { box.classList.add("dark"); title.appendChild(el("span", "DARK", "badge")); }
      box.appendChild(title);
      let total = 0, busy = 0, dead = 0;
      const clusters = Object.keys(S.clusters || {}).filter((c) => S.clusters[c].region === region).sort();
      for (const cid of clusters) {
        const hosts = (byCluster[cid] || []).sort();
        const gpuHosts = hosts.filter((h) => (D.meta.machines[h] || [0, 0, 0])[2] > 0);
        const cpuHosts = hosts.filter((h) => !((D.meta.machines[h] || [0, 0, 0])[2] > 0));
        const div = el("div", null, "cluster");
        const cells = [];
        for (const h of gpuHosts) {
          const n = D.meta.machines[h][2];
          const isDown = down[region] || down[h] || !S.machines[h].healthy;
          const held = gpus[h] || [];
          let k = 0;
          for (const [g, prio] of held) for (let j = 0; j < g && k < n; j++, k++) cells.push(isDown ? DOWN : PRIORITY_COLOURS[Math.min(7, Math.max(0, prio))]);
          for (; k < n; k++) cells.push(isDown ? DOWN : FREE);
          // A dark machine's allocations (left over until its CM frees them) count as down.
          total += n; if (isDown) dead += n; else busy += Math.min(n, held.reduce((s, x) => s + x[0], 0));
        }
        let cpuBusy = 0, cpuDown = 0;
        for (const h of cpuHosts) {
          const isDown = down[region] || down[h] || !S.machines[h].healthy;
          cells.push(isDown ? DOWN : cpu[h] ? CPU_BUSY : "#eceff1");
          if (cpu[h]) cpuBusy++; if (isDown) cpuDown++;
        }
        const gpuCount = gpuHosts.reduce((s, h) => s + D.meta.machines[h][2], 0);
        const up = (h) => !(down[region] || down[h] || !S.machines[h].healthy);
        const gpuBusy = gpuHosts.filter(up).reduce((s, h) => s + (gpus[h] || []).reduce((a, x) => a + x[0], 0), 0);
        const gpuDown = gpuHosts.filter((h) => !up(h)).reduce((s, h) => s + D.meta.machines[h][2], 0);
        div.appendChild(el("div", cid + " · GPUs " + gpuBusy + "/" + gpuCount + " busy" + (gpuDown ? ", " + gpuDown + " down" : "") + " · CPU machines " + cpuBusy + "/" + cpuHosts.length + " busy" + (cpuDown ? ", " + cpuDown + " down" : ""), "name"));
        const size = 7, cols = Math.max(8, Math.min(64, Math.ceil(Math.sqrt(cells.length * 4))));
        const canvas = document.createElement("canvas");
        canvas.width = cols * size; canvas.height = Math.max(1, Math.ceil(cells.length / cols)) * size;
        const ctx = canvas.getContext("2d");
        cells.forEach((c, i) => { ctx.fillStyle = c; ctx.fillRect((i % cols) * size, Math.floor(i / cols) * size, size - 1, size - 1); });
        div.appendChild(canvas);
        box.appendChild(div);
      }
      const downHosts = Object.keys(down).filter((h) => h !== region && h.startsWith(region + "/"));
      const summary = "GPUs: " + busy + " busy, " + (total - busy - dead) + " free, " + dead + " down" + (downHosts.length ? " · machines down: " + downHosts.length : "");
      box.appendChild(el("div", summary));
      world.appendChild(box);
    }
  }

  function renderRoles() {
    const body = $("roles").tBodies[0];
    clear(body);
    const actors = S.actors || {};
    const leases = S.leases || {};
    const shown = new Set();
    for (const role of Object.keys(leases).sort()) {
      const l = leases[role];
      const st = (actors[l.holder] || { state: "up" }).state;
      const tr = el("tr", null, st === "up" ? "" : st);
      tr.dataset.role = role;
      if (changedRoles.has(role)) tr.classList.add("changed");
      tr.appendChild(el("td", role));
      const holder = el("td", l.holder); holder.className = "leader"; tr.appendChild(holder);
      const epoch = el("td", l.epoch); epoch.className = "epoch"; tr.appendChild(epoch);
      tr.appendChild(el("td", st === "up" ? "leads" : st));
      body.appendChild(tr);
      shown.add(l.holder);
    }
    const downs = Object.keys(actors).filter((a) => actors[a].state !== "up").sort();
    $("down-actors").textContent = downs.length ? "down or paused: " + downs.map((a) => a + " (" + actors[a].state + ")").join(", ") : "";
  }

  function renderQueue() {
    const ws = S.workloads || {};
    const counts = {};
    const queued = [];
    for (const id in ws) {
      const w = ws[id];
      counts[w.state] = (counts[w.state] || 0) + 1;
      if (QUEUED.has(w.state)) queued.push([id, w]);
    }
    $("counts").textContent = Object.keys(counts).sort().map((s) => s + " " + counts[s]).join(" · ") || "empty";
    queued.sort((a, b) => a[1].priority - b[1].priority || b[1].credit - a[1].credit || (a[0] < b[0] ? -1 : 1));
    const body = $("queue").tBodies[0];
    clear(body);
    for (const [id, w] of queued.slice(0, 10)) {
      const tr = el("tr");
      tr.appendChild(el("td", id));
      tr.appendChild(el("td", "⟨" + w.priority + ", " + w.credit + "⟩"));
      tr.appendChild(el("td", w.state));
      tr.appendChild(el("td", w.tenant));
      tr.appendChild(el("td", w.gpus));
      body.appendChild(tr);
    }
  }

  function renderAuctions() {
    const box = $("auctions");
    clear(box);
    const as = S.auctions || {};
    const ids = Object.keys(as).map(Number).sort((a, b) => b - a).slice(0, 6);
    for (const id of ids) {
      const a = as[id];
      const div = el("div", null, "auction");
      div.appendChild(el("b", "#" + id + " " + a.w));
      div.appendChild(el("span", " opened " + fmt(a.at) + " · "));
      const regions = Object.keys(a.bids).sort();
      for (const r of regions) {
        const bid = a.bids[r];
        const txt = typeof bid === "number" ? r + ": " + bid.toPrecision(4) : r + ": " + bid;
        div.appendChild(el("span", txt + "  ", r === a.win ? "win" : typeof bid === "number" ? "" : "abstain"));
      }
      if (!regions.length && a.why.length) div.appendChild(el("span", "no bid (" + a.why.join(", ") + ")", "abstain"));
      div.appendChild(el("span", a.win ? " → winner " + a.win : a.out ? " → " + a.out : " (open)", a.win ? "win" : ""));
      box.appendChild(div);
    }
    if (!ids.length) box.textContent = "none yet";
  }

  function renderWan() {
    const wan = $("wan");
    clear(wan);
    const regions = regionsOf();
    const n = regions.length, cx = 180, cy = 112, r = n > 1 ? 85 : 0;
    const at = {};
    regions.forEach((g, i) => {
      const a = -Math.PI / 2 + (2 * Math.PI * i) / Math.max(1, n);
      at[g] = [cx + r * Math.cos(a), cy + r * Math.sin(a)];
    });
    const faults = S.faults || {};
    const cut = {}, degraded = {};
    for (const k in faults) {
      const f = faults[k];
      const rs = f.regions;
      if (!rs || rs.length !== 2) continue;
      const pair = [rs[0], rs[1]].sort().join(SEP);
      if (f.action === "partition") cut[pair] = true; else degraded[pair] = f.action;
    }
    for (let i = 0; i < n; i++) for (let j = i + 1; j < n; j++) {
      const [a, b] = [regions[i], regions[j]];
      const pair = [a, b].sort().join(SEP);
      const line = svg("line", { x1: at[a][0], y1: at[a][1], x2: at[b][0], y2: at[b][1], stroke: degraded[pair] ? "#ef6c00" : "#9e9e9e", "stroke-width": 2 });
      if (cut[pair]) { line.setAttribute("class", "cut"); line.setAttribute("stroke", "#c62828"); }
      line.appendChild(svg("title", {}, cut[pair] ? "partitioned" : degraded[pair] || "link"));
      wan.appendChild(line);
      if (cut[pair]) wan.appendChild(svg("text", { x: (at[a][0] + at[b][0]) / 2, y: (at[a][1] + at[b][1]) / 2 - 4, fill: "#c62828", "font-size": 11, "text-anchor": "middle" }, "cut"));
    }
    const live = Object.values(S.copies || {}).filter((c) => c.state === "queued" || c.state === "copying");
    live.forEach((c, k) => {
      if (!at[c.src] || !at[c.dst]) return;
      const [x1, y1] = at[c.src], [x2, y2] = at[c.dst];
      const off = 6 + 4 * k;
      wan.appendChild(svg("line", { x1: x1 + off, y1: y1 + off, x2: x2 + off, y2: y2 + off, stroke: "#1565c0", "stroke-width": 3, "stroke-opacity": 0.6 }));
    });
    for (const g of regions) {
      const dark = (S.down || {})[g];
      wan.appendChild(svg("circle", { cx: at[g][0], cy: at[g][1], r: 16, fill: dark ? "#222" : "#fff", stroke: "#555" }));
      wan.appendChild(svg("text", { x: at[g][0], y: at[g][1] + 30, "font-size": 11, "text-anchor": "middle" }, g));
    }
    const box = $("copies");
    clear(box);
    for (const c of live) {
      const pct = c.size_bytes ? Math.round((100 * c.bytes_done) / c.size_bytes) : 0;
      box.appendChild(el("div", "copy #" + c.id + " " + c.table + ": " + c.src + " → " + c.dst + " · " + pct + "% of " + fmtBytes(c.size_bytes) + " · " + c.state + " (" + c.reason + ")"));
    }
    if (!live.length) box.textContent = "no copies in flight";
  }

  function renderLog() {
    const body = $("log").tBodies[0];
    clear(body);
    const text = $("filter").value.toLowerCase();
    const cat = $("category").value;
    const ok = (i) => (!cat || steps[i][1] === cat) && (!text || (steps[i][2] + " " + steps[i][3]).toLowerCase().includes(text));
    const before = [], after = [];
    for (let i = pos, seen = 0; i >= 0 && before.length < 12 && seen < 20000; i--, seen++) if (ok(i)) before.push(i);
    for (let i = pos + 1, seen = 0; i < N && after.length < 12 && seen < 20000; i++, seen++) if (ok(i)) after.push(i);
    for (const i of before.reverse().concat(after)) {
      const s = steps[i];
      const tr = el("tr", null, "cat-" + s[1] + (i === pos ? " now" : ""));
      tr.appendChild(el("td", fmt(s[0])));
      tr.appendChild(el("td", s[2]));
      tr.appendChild(el("td", s[3]));
      tr.addEventListener("click", () => { playing = false; goTo(i); });
      body.appendChild(tr);
    }
  }

  // ---- the timeline -----------------------------------------------------------------------
  let cursor = null;
  function width() { return $("timeline").getBoundingClientRect().width || 800; }
  function drawTimeline() {
    const tl = $("timeline");
    clear(tl);
    const w = width();
    const x = (t) => (t / END) * w;
    // Fault windows, named, in lanes.
    const lanes = [];
    for (const [start, end, label, action] of D.windows) {
      const e = end === null ? END : end;
      let lane = lanes.findIndex((last) => last <= start);
      if (lane < 0) { lane = lanes.length; lanes.push(0); }
      if (lane > 3) continue;
      lanes[lane] = e;
      const y = 2 + lane * 12;
      const rect = svg("rect", { x: x(start), y: y, width: Math.max(2, x(e) - x(start)), height: 11, fill: action === "down" ? "#424242" : "#ce93d8", "fill-opacity": 0.8 });
      rect.appendChild(svg("title", {}, label + " " + fmt(start) + "–" + (end === null ? "end" : fmt(end))));
      tl.appendChild(rect);
      tl.appendChild(svg("text", { x: x(start) + 2, y: y + 9, "font-size": 9, fill: action === "down" ? "#fff" : "#000" }, label));
    }
    // Decisions per pixel column as ticks, violations in red.
    const dec = new Map(), vio = new Set(), flt = new Set();
    for (const s of steps) {
      const px = Math.floor(x(s[0]));
      if (s[1] === "d") dec.set(px, (dec.get(px) || 0) + 1);
      else if (s[1] === "v") vio.add(px);
      else if (s[1] === "f") flt.add(px);
    }
    let max = 1;
    for (const v of dec.values()) max = Math.max(max, v);
    for (const [px, n] of dec) tl.appendChild(svg("rect", { x: px, y: 64 - 14 * Math.sqrt(n / max), width: 1, height: 14 * Math.sqrt(n / max) + 0.5, fill: "#1565c0" }));
    for (const px of flt) tl.appendChild(svg("rect", { x: px, y: 50, width: 1, height: 8, fill: "#8e24aa" }));
    for (const px of vio) tl.appendChild(svg("rect", { x: px - 1, y: 0, width: 3, height: 74, fill: "#d50000", class: "violation" }));
    tl.appendChild(svg("text", { x: 2, y: 72, "font-size": 9, fill: "#555" }, "0"));
    tl.appendChild(svg("text", { x: w - 2, y: 72, "font-size": 9, fill: "#555", "text-anchor": "end" }, fmt(END)));
    cursor = svg("rect", { x: 0, y: 0, width: 2, height: 74, fill: "#000" });
    tl.appendChild(cursor);
  }
  function renderCursor() {
    if (cursor) cursor.setAttribute("x", (T / END) * width() - 1);
  }

  // ---- playing ----------------------------------------------------------------------------
  function frame(now) {
    if (!playing) return;
    const dt = lastFrame ? Math.min(250, now - lastFrame) : 0;
    lastFrame = now;
    T = Math.min(END, T + dt * 1000 * SPEEDS[speedIndex]);
    const p = stepAtTime(T);
    if (p !== pos) goTo(p, true); else queueRender();
    if (T >= END) playing = false;
    if (playing) requestAnimationFrame(frame); else queueRender();
  }
  function togglePlay() {
    playing = !playing;
    lastFrame = 0;
    if (playing) { if (T >= END) goTo(-1); requestAnimationFrame(frame); }
    queueRender();
  }
  function setSpeed(i) {
    speedIndex = Math.max(0, Math.min(SPEEDS.length - 1, i));
    $("speed").value = String(speedIndex);
  }

  // ---- wiring -------------------------------------------------------------------------------
  function init() {
    const m = D.meta;
    document.title = "mastemu player: " + m.scenario;
    $("scenario").textContent = m.scenario;
    $("subtitle").textContent = "seed " + m.seed + " · " + m.status + " · " + fmt(END) + " · " + m.events + " events, " + N + " shown";
    $("description").textContent = m.description;
    SPEEDS.forEach((s, i) => $("speed").appendChild(el("option", s >= 60 ? s / 60 + " min/s" : s + " s/s")).value = String(i));
    setSpeed(speedIndex);
    const legend = $("legend");
    PRIORITY_COLOURS.forEach((c, p) => { const s = el("span", "priority " + p); const i = el("i"); i.style.background = c; s.prepend(i); legend.appendChild(s); });
    for (const [label, c] of [["free", FREE], ["down", DOWN], ["CPU machine busy", CPU_BUSY]]) { const s = el("span", label); const i = el("i"); i.style.background = c; s.prepend(i); legend.appendChild(s); }
    $("b-start").onclick = () => { playing = false; goTo(-1); };
    $("b-prev").onclick = () => { playing = false; goTo(pos - 1); };
    $("b-next").onclick = () => { playing = false; goTo(pos + 1); };
    $("b-play").onclick = togglePlay;
    $("b-decision").onclick = () => jump(isCat("d"), 1);
    $("b-fault").onclick = () => jump(isCat("f"), 1);
    $("b-violation").onclick = () => jump(isCat("v"), 1);
    $("b-leader").onclick = () => jump(isLeaderChange, 1);
    $("speed").onchange = () => setSpeed(Number($("speed").value));
    $("filter").oninput = queueRender;
    $("category").onchange = queueRender;
    $("timeline").addEventListener("click", (ev) => {
      const r = $("timeline").getBoundingClientRect();
      const t = Math.round(((ev.clientX - r.left) / r.width) * END);
      playing = false;
      goTo(stepAtTime(t), true);
      T = t;
      queueRender();
    });
    document.addEventListener("keydown", (ev) => {
      if (ev.target && (ev.target.tagName === "INPUT" || ev.target.tagName === "SELECT")) {
        if (ev.key === "Escape") ev.target.blur();
        return;
      }
      const dir = ev.shiftKey ? -1 : 1;
      const k = ev.key.toLowerCase();
      if (ev.key === "ArrowRight") { playing = false; goTo(pos + 1); }
      else if (ev.key === "ArrowLeft") { playing = false; goTo(pos - 1); }
      else if (ev.key === " ") togglePlay();
      else if (k === "d") jump(isCat("d"), dir);
      else if (k === "f") jump(isCat("f"), dir);
      else if (k === "v") jump(isCat("v"), dir);
      else if (k === "l") jump(isLeaderChange, dir);
      else if (ev.key === "+" || ev.key === "=") setSpeed(speedIndex + 1);
      else if (ev.key === "-") setSpeed(speedIndex - 1);
      else if (ev.key === "Home") { playing = false; goTo(-1); }
      else if (ev.key === "End") { playing = false; goTo(N - 1); }
      else if (ev.key === "/") $("filter").focus();
      else return;
      ev.preventDefault();
    });
    window.addEventListener("hashchange", fromHash);
    window.addEventListener("resize", () => { drawTimeline(); queueRender(); });
    drawTimeline();
    seek(-1);
    fromHash();
    queueRender();
  }
  function fromHash() {
    const m = /s=(-?\d+)/.exec(location.hash);
    if (m) { const p = Number(m[1]); if (p !== pos) goTo(p); }
  }
  init();
})();
