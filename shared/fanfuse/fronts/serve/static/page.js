// The fanfuse search page (fronts/serve/page.py says why it is static and public).
//
// Rules this file keeps:
// - every string that came from the server (a title, a snippet, an error, a platform name) goes
//   into the page as text: `textContent` and text nodes only, never parsed as HTML; a link is made
//   only of an http(s) URL. The page's CSP (no inline script) is the second wall, not the first.
// - the API key lives in this tab's sessionStorage and goes only to this origin, in X-Api-Key.
// - the event stream is read with fetch (EventSource cannot send a header), and resumed with
//   Last-Event-ID when the connection drops, as EventSource would.
// - where the calls go comes from page/config.json (fronts/serve/page.py): serve's names its own
//   routes and its event stream; the local functions stack's names each target's URL and no
//   stream, and the page then polls `search_status` (the same TaskView the events carry).
"use strict";

(() => {
  const KEY_STORAGE = "fanfuse.apiKey";
  const MAX_QUERIES = 5;
  const RECONNECT_FOR_MS = 60000; // how long a lost stream is retried before the page gives up
  const RECONNECT_MAX_DELAY_MS = 5000;
  const POLL_MS = 500; // how often search_status is read when there is no event stream
  const TERMINAL = new Set(["completed", "partial", "failed", "cancelled"]);
  const $ = (id) => document.getElementById(id);

  // Where each call goes; replaced by page/config.json at start (these are serve's own routes).
  let config = {
    start_search: "start_search",
    search_status: "search_status",
    cancel_search: "cancel_search",
    platforms: "platforms",
    events: true,
  };

  const state = {
    key: null,
    taskId: null,
    lastEventId: null,
    finished: false,
    controller: null,
    runs: new Map(), // platform name -> its <li>
  };

  // ------------------------------------------------------------------------------------------
  // Building elements: text only.

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (name === "text") node.textContent = String(value);
      else if (name === "class") node.className = value;
      else node.setAttribute(name, value === true ? "" : String(value));
    }
    for (const child of children) {
      if (child === undefined || child === null || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function clear(node) {
    node.replaceChildren();
    return node;
  }

  function isWebUrl(url) {
    try {
      const parsed = new URL(url);
      return parsed.protocol === "http:" || parsed.protocol === "https:";
    } catch {
      return false;
    }
  }

  function pct(value) {
    const n = Number(value);
    return Number.isFinite(n) ? Math.max(0, Math.min(100, n)) : 0;
  }

  // ------------------------------------------------------------------------------------------
  // The key, and calls made with it.

  function setKeyNote(text) {
    $("key-note").textContent = text;
  }

  function useKey(key) {
    state.key = key;
    if (key) {
      sessionStorage.setItem(KEY_STORAGE, key);
      $("api-key").value = "";
      $("api-key").placeholder = "key set for this tab (type to replace)";
      setKeyNote("Key kept in this tab's session storage; it is sent only to the fanfuse API this page calls.");
    } else {
      sessionStorage.removeItem(KEY_STORAGE);
      $("api-key").placeholder = "ff_... (kept in this tab only)";
      setKeyNote("No key: enter one to search.");
    }
  }

  function call(path, options) {
    const headers = Object.assign({}, (options && options.headers) || {});
    if (state.key) headers["X-Api-Key"] = state.key;
    return fetch(path, Object.assign({}, options, { headers, cache: "no-store" }));
  }

  async function errorText(response) {
    // The API's error body: {error, message, problems: [{field, problem}]}.
    let body = null;
    try {
      body = await response.json();
    } catch {
      body = null;
    }
    const lines = [];
    const head = `HTTP ${response.status}`;
    if (body && typeof body === "object") {
      lines.push(`${head}: ${body.message || body.error || "error"}`);
      for (const p of Array.isArray(body.problems) ? body.problems : []) {
        lines.push(`${p.field}: ${p.problem}`);
      }
    } else {
      lines.push(head);
    }
    const retry = response.headers.get("Retry-After");
    if (retry) lines.push(`retry after ${retry} s`);
    if (response.status === 401 || response.status === 403) {
      lines.push("The key was refused: enter a valid API key above.");
    }
    return lines;
  }

  function showErrors(lines) {
    const box = clear($("form-errors"));
    if (!lines || !lines.length) return;
    box.append(el("ul", {}, ...lines.map((line) => el("li", { text: line }))));
  }

  // ------------------------------------------------------------------------------------------
  // Platforms.

  async function loadPlatforms() {
    const list = $("platform-list");
    if (!state.key) {
      clear(list).append(el("p", { class: "note", text: "Enter the API key to list the platforms." }));
      return;
    }
    let response;
    try {
      response = await call(config.platforms);
    } catch (err) {
      clear(list).append(el("p", { class: "note", text: `Could not list platforms: ${err}` }));
      return;
    }
    if (!response.ok) {
      const lines = await errorText(response);
      clear(list).append(el("p", { class: "note", text: lines.join(" ") }));
      if (response.status === 401) setKeyNote(lines.join(" "));
      return;
    }
    const platforms = await response.json();
    clear(list);
    // The unavailable ones, each with its reason, folded under the available ones: the picker
    // stays short, and why a platform cannot be ticked is one click away, never hidden.
    const away = platforms.filter((p) => !p.available);
    const awayList = el("div", { class: "platform-list" });
    for (const p of platforms) {
      const id = `platform-${p.name}`;
      const box = el("input", { type: "checkbox", id, name: "platform", value: p.name });
      const label = el("label", { for: id, class: "platform" }, box, " ", el("span", { text: p.name }));
      const item = el("div", { class: "platform-item", "data-platform": p.name }, label);
      if (!p.available) {
        box.disabled = true;
        const reasonId = `${id}-reason`;
        box.setAttribute("aria-describedby", reasonId);
        item.classList.add("unavailable");
        item.append(el("span", { id: reasonId, class: "reason", text: `unavailable: ${p.reason || "not configured"}` }));
        awayList.append(item);
        continue;
      } else if (p.health && p.health.state && p.health.state !== "closed") {
        const until = p.health.retry_at ? ` until ${p.health.retry_at}` : "";
        item.append(el("span", { class: "reason", text: `breaker ${p.health.state}${until}` }));
      }
      list.append(item);
    }
    if (!list.childElementCount) list.append(el("p", { class: "note", text: "No platform is available here." }));
    if (away.length) {
      list.append(el("details", { class: "unavailable-platforms", id: "unavailable-platforms" },
        el("summary", { text: `${away.length} unavailable here, and why` }), awayList));
    }
    updateRequest();
  }

  // ------------------------------------------------------------------------------------------
  // The request.

  function splitList(text) {
    return text.split(/[\s,]+/).map((s) => s.trim()).filter(Boolean);
  }

  function buildRequest() {
    const problems = [];
    const queries = $("queries").value.split("\n").map((q) => q.trim()).filter(Boolean);
    if (!queries.length) problems.push("query: type a query");
    if (queries.length > MAX_QUERIES) problems.push(`query: at most ${MAX_QUERIES} queries, one per line (${queries.length} given)`);
    const body = { query: queries.length === 1 ? queries[0] : queries };
    const platforms = [...document.querySelectorAll("#platform-list input[name=platform]:checked")].map((b) => b.value);
    if (platforms.length) body.platform = platforms;
    body.mode = $("mode").value;
    const max = $("max-results").value.trim();
    if (max) {
      const n = Number(max);
      if (!Number.isInteger(n) || n < 1 || n > 100) problems.push("max_results: a whole number from 1 to 100");
      body.max_results = n;
    }
    if ($("include-content").checked) body.include_content = true;
    const include = splitList($("include-domains").value);
    if (include.length) body.include_domains = include;
    const exclude = splitList($("exclude-domains").value);
    if (exclude.length) body.exclude_domains = exclude;
    if ($("time-range").value) body.time_range = $("time-range").value;
    const country = $("country").value.trim().toUpperCase();
    if (country) body.country = country;
    if ($("safesearch").value) body.safesearch = $("safesearch").value;
    const timeout = $("timeout").value.trim();
    if (timeout) {
      const t = Number(timeout);
      if (!Number.isFinite(t)) problems.push("timeout_s: a number of seconds");
      body.timeout_s = t;
    }
    if ($("cache").value !== "auto") body.cache = $("cache").value;
    return { body, problems };
  }

  function shellQuote(text) {
    return `'${text.replace(/'/g, `'\\''`)}'`;
  }

  function curlOf(body) {
    const url = new URL(config.start_search, document.baseURI).href;
    return [
      `curl -sS -X POST ${shellQuote(url)}`,
      `  -H 'Content-Type: application/json'`,
      `  -H "X-Api-Key: $FANFUSE_API_KEY"`,
      `  --data-raw ${shellQuote(JSON.stringify(body))}`,
    ].join(" \\\n");
  }

  function updateRequest() {
    const { body } = buildRequest();
    $("request-json").textContent = JSON.stringify(body, null, 2);
    $("request-curl").textContent = curlOf(body);
  }

  async function copy(text, what) {
    const note = $("copy-note");
    try {
      await navigator.clipboard.writeText(text);
      note.textContent = `${what} copied.`;
    } catch {
      $("request-details").open = true;
      note.textContent = `Could not copy ${what} here: select it below.`;
    }
  }

  // ------------------------------------------------------------------------------------------
  // Searching, streaming, cancelling.

  function setRunning(running) {
    $("search-button").disabled = running;
    $("cancel-button").disabled = !running;
  }

  async function startSearch(event) {
    if (event) event.preventDefault();
    showErrors([]);
    if (!state.key) {
      showErrors(["Enter the API key first (above)."]);
      $("api-key").focus();
      return;
    }
    const { body, problems } = buildRequest();
    if (problems.length) {
      showErrors(problems);
      return;
    }
    stopStream();
    setRunning(true);
    let response;
    try {
      response = await call(config.start_search, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(body),
      });
    } catch (err) {
      setRunning(false);
      showErrors([`Could not reach the server: ${err}`]);
      return;
    }
    if (response.status !== 202) {
      setRunning(false);
      showErrors(await errorText(response));
      return;
    }
    const accepted = await response.json();
    resetView(accepted.task_id);
    $("progress-section").scrollIntoView({ block: "start" });
    if (config.events) stream(accepted.task_id);
    else poll(accepted.task_id);
  }

  function resetView(taskId) {
    state.taskId = taskId;
    state.lastEventId = null;
    state.finished = false;
    state.runs = new Map();
    clear($("platform-runs"));
    clear($("waterfall"));
    $("timeline").hidden = true;
    clear($("results"));
    clear($("problems"));
    clear($("cost"));
    $("results-note").textContent = "";
    $("status-line").textContent = "Started; waiting for the first progress event…";
    $("overall-bar").value = 0;
    $("overall-text").textContent = "0%";
    $("progress-section").hidden = false;
    $("progress-section").dataset.task = taskId;
    $("progress-section").dataset.status = "pending";
    $("problems-section").hidden = true;
    $("results-section").hidden = true;
    $("cost-section").hidden = true;
  }

  function stopStream() {
    if (state.controller) state.controller.abort();
    state.controller = null;
  }

  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  async function stream(taskId) {
    let failures = 0;
    let lostSince = null;
    while (state.taskId === taskId && !state.finished) {
      const controller = new AbortController();
      state.controller = controller;
      const headers = { Accept: "text/event-stream" };
      if (state.lastEventId) headers["Last-Event-ID"] = state.lastEventId;
      try {
        const response = await call(`${config.search_status}/${encodeURIComponent(taskId)}/events`, {
          headers,
          signal: controller.signal,
        });
        if (!response.ok) {
          showErrors(await errorText(response));
          finish(taskId);
          return;
        }
        failures = 0;
        lostSince = null;
        await readEvents(response.body, (ev) => onEvent(taskId, ev));
      } catch (err) {
        if (controller.signal.aborted) return;
      }
      if (state.finished || state.taskId !== taskId) return;
      failures += 1;
      lostSince = lostSince || Date.now();
      if (Date.now() - lostSince > RECONNECT_FOR_MS) {
        $("status-line").textContent = "Lost the event stream; showing the last state received.";
        finish(taskId);
        return;
      }
      $("status-line").textContent = `Connection lost; reconnecting (attempt ${failures})…`;
      await sleep(Math.min(RECONNECT_MAX_DELAY_MS, 500 * 2 ** (failures - 1)));
    }
  }

  // No event stream (the local functions stack): read the TaskView every POLL_MS until it is
  // terminal; a lost connection is retried as the stream's is, for RECONNECT_FOR_MS.
  async function poll(taskId) {
    let lostSince = null;
    while (state.taskId === taskId && !state.finished) {
      const controller = new AbortController();
      state.controller = controller;
      try {
        const response = await call(`${config.search_status}/${encodeURIComponent(taskId)}`, {
          signal: controller.signal,
        });
        if (!response.ok) {
          showErrors(await errorText(response));
          finish(taskId);
          return;
        }
        const view = await response.json();
        if (state.taskId !== taskId || state.finished) return;
        lostSince = null;
        render(view);
        if (TERMINAL.has(view.status)) {
          finish(taskId);
          return;
        }
      } catch (err) {
        if (controller.signal.aborted) return;
        lostSince = lostSince || Date.now();
        if (Date.now() - lostSince > RECONNECT_FOR_MS) {
          $("status-line").textContent = "Lost the server; showing the last state received.";
          finish(taskId);
          return;
        }
        $("status-line").textContent = "Connection lost; retrying…";
      }
      await sleep(POLL_MS);
    }
  }

  // Server-Sent Events over a fetch body: blocks separated by a blank line, `field: value` lines.
  async function readEvents(body, onEvent) {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const ev = { event: "message", data: [], id: null };
        for (const line of block.split("\n")) {
          if (!line || line.startsWith(":")) continue;
          const colon = line.indexOf(":");
          const field = colon < 0 ? line : line.slice(0, colon);
          let val = colon < 0 ? "" : line.slice(colon + 1);
          if (val.startsWith(" ")) val = val.slice(1);
          if (field === "event") ev.event = val;
          else if (field === "data") ev.data.push(val);
          else if (field === "id") ev.id = val;
        }
        if (ev.data.length || ev.id) onEvent({ event: ev.event, id: ev.id, data: ev.data.join("\n") });
      }
    }
  }

  function onEvent(taskId, ev) {
    if (state.taskId !== taskId) return;
    if (ev.id) state.lastEventId = ev.id;
    let data = null;
    try {
      data = ev.data ? JSON.parse(ev.data) : null;
    } catch {
      return;
    }
    if (ev.event === "progress" && data) render(data);
    else if (ev.event === "done" && data) {
      render(data);
      finish(taskId);
    } else if (ev.event === "timeout" && data) {
      render(data);
      $("status-line").textContent = `The server stopped waiting: the search is still ${data.status}; this is its last state.`;
      finish(taskId);
    } else if (ev.event === "error") {
      showErrors([`The search is gone: ${(data && data.message) || "error"}`]);
      finish(taskId);
    }
  }

  function finish(taskId) {
    if (state.taskId !== taskId) return;
    state.finished = true;
    stopStream();
    setRunning(false);
  }

  async function cancelSearch() {
    const taskId = state.taskId;
    if (!taskId || state.finished) return;
    $("cancel-button").disabled = true;
    $("status-line").textContent = "Cancelling…";
    let response;
    try {
      response = await call(config.cancel_search, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ task_id: taskId }),
      });
    } catch (err) {
      showErrors([`Could not cancel: ${err}`]);
      $("cancel-button").disabled = false;
      return;
    }
    if (response.ok) {
      const view = await response.json();
      render(view);
      finish(taskId);
    } else if (response.status !== 409) { // 409: it ended meanwhile; its done event follows
      showErrors(await errorText(response));
      $("cancel-button").disabled = false;
    }
  }

  // ------------------------------------------------------------------------------------------
  // Rendering a TaskView.

  function render(view) {
    const terminal = TERMINAL.has(view.status);
    const section = $("progress-section");
    section.dataset.status = view.status;
    const progress = view.progress || {};
    const said = view.summary && view.summary.message;
    const summary = said && said !== progress.message ? ` — ${said}` : "";
    $("status-line").textContent = `Search ${view.status}${progress.message ? `: ${progress.message}` : ""}${summary}`;
    const percent = pct(progress.percent);
    $("overall-bar").value = percent;
    $("overall-bar").setAttribute("aria-valuetext", `${Math.round(percent)}%`);
    $("overall-text").textContent = `${Math.round(percent)}%`;
    for (const run of view.platform_runs || []) renderRun(run);
    renderTimeline(view, terminal);
    renderProblems(view);
    renderResults(view, terminal);
    renderCost(view.cost);
  }

  function renderRun(run) {
    let item = state.runs.get(run.name);
    if (!item) {
      const barId = `run-bar-${state.runs.size}`;
      item = el(
        "li",
        { class: "run", "data-platform": run.name },
        el("div", { class: "run-head" },
          el("label", { for: barId, class: "run-name", text: run.name }),
          el("span", { class: "run-state" })),
        el("progress", { id: barId, max: 100, value: 0 }),
        el("div", { class: "run-message" }),
        el("div", { class: "run-error" }),
      );
      state.runs.set(run.name, item);
      $("platform-runs").append(item);
    }
    const percent = pct(run.percent);
    item.dataset.state = run.state;
    item.dataset.stage = run.stage;
    const stage = String(run.stage || "").replace(`${run.name}_`, "");
    item.querySelector(".run-state").textContent = `${run.state} · ${stage} · ${Math.round(percent)}%`;
    const bar = item.querySelector("progress");
    bar.value = percent;
    bar.setAttribute("aria-valuetext", `${run.state}, ${Math.round(percent)}%`);
    const parts = [run.message || ""];
    if (run.progress && run.progress.total) parts.push(`step ${run.progress.current}/${run.progress.total}`);
    if (run.cache) parts.push(`cache ${run.cache.state}`);
    item.querySelector(".run-message").textContent = parts.filter(Boolean).join(" · ");
    item.querySelector(".run-error").textContent = run.error ? `error: ${run.error}` : "";
  }

  // The timeline (wire/timeline.py): seconds after the request arrived. A platform that has
  // ended is drawn from the task document's timeline; one still running from its platform
  // document (its start, then a bar up to now).
  function timelineLanes(view, now) {
    const created = Date.parse(view.created_at);
    const kept = new Map(((view.timeline || {}).runs || []).map((e) => [e.platform, e]));
    const lanes = [];
    for (const run of view.platform_runs || []) {
      const entry = kept.get(run.name);
      if (entry) { lanes.push(entry); continue; }
      const started = run.started_at ? (Date.parse(run.started_at) - created) / 1000 : null;
      lanes.push({ platform: run.name, state: run.state, started, running: started !== null ? now : null, stages: {} });
    }
    return lanes;
  }

  function seconds(value) {
    return typeof value === "number" ? `${value.toFixed(3)} s` : "–";
  }

  function laneText(e) {
    const parts = [`${e.platform} ${e.state}`];
    if (e.queued !== undefined && e.queued !== null) parts.push(`queued ${seconds(e.queued)}`);
    if (e.started !== null && e.started !== undefined) parts.push(`started ${seconds(e.started)}`);
    if (e.first_result !== null && e.first_result !== undefined) parts.push(`first result ${seconds(e.first_result)}`);
    for (const [stage, took] of Object.entries(e.stages || {})) parts.push(`${stage} ${seconds(took)}`);
    if (e.finished !== null && e.finished !== undefined) parts.push(`finished ${seconds(e.finished)}`);
    return parts.join(", ");
  }

  function renderTimeline(view, terminal) {
    const kept = view.timeline || {};
    const now = terminal && kept.finalized ? kept.finalized : (Date.now() - Date.parse(view.created_at)) / 1000;
    const lanes = timelineLanes(view, now);
    const ends = lanes.map((e) => e.finished ?? e.running ?? 0);
    const span = Math.max(kept.finalized || 0, now, ...ends, 0.001);
    const at = (value) => `${Math.max(0, Math.min(100, (value / span) * 100))}%`;
    const width = (from, to) => `${Math.max(0, Math.min(100, ((to - from) / span) * 100))}%`;
    const place = (node, left, size) => { // CSSOM, not a style attribute: the CSP allows it
      node.style.left = left;
      if (size !== undefined) node.style.width = size;
      return node;
    };
    const seg = (cls, from, to, title) => place(el("span", { class: cls, title }), at(from), width(from, to));
    const list = clear($("waterfall"));
    for (const e of lanes) {
      const track = el("div", { class: "lane-track" });
      if (e.queued != null && e.started != null) track.append(seg("seg-queue", e.queued, e.started, `in its queue ${seconds(e.started - e.queued)}`));
      if (e.started != null && e.working != null) track.append(seg("seg-claim", e.started, e.working, `claim ${seconds(e.working - e.started)}`));
      let from = e.working ?? e.started;
      for (const [stage, took] of Object.entries(e.stages || {})) {
        if (from == null) break;
        track.append(seg(`seg-${stage}`, from, from + took, `${stage} ${seconds(took)}`));
        from += took;
      }
      if (e.running != null && e.started != null) track.append(seg("seg-running", e.started, e.running, "running"));
      if (e.first_result != null) track.append(place(el("span", { class: "tick-first", title: `first result ${seconds(e.first_result)}` }), at(e.first_result)));
      list.append(el("li", { class: "lane", "data-platform": e.platform, "data-state": e.state, "data-finished": e.finished ?? "", "aria-label": laneText(e) },
        el("span", { class: "lane-name", text: e.platform }), track));
    }
    if (kept.fan_in != null || kept.finalized != null) {
      const track = el("div", { class: "lane-track" });
      const last = Math.max(0, ...lanes.map((e) => e.finished ?? 0));
      if (kept.fan_in != null) track.append(seg("seg-fan_in", last, kept.fan_in, `fan-in ${seconds(kept.fan_in)}`));
      if (kept.finalized != null) track.append(seg("seg-final", kept.fan_in ?? last, kept.finalized, `finalized ${seconds(kept.finalized)} by ${kept.finalized_by}`));
      const text = `finalized ${seconds(kept.finalized)} by ${kept.finalized_by || "–"}; fan-in ${seconds(kept.fan_in)}`;
      list.append(el("li", { class: "lane search", "data-platform": "", "data-finalized": kept.finalized ?? "", "aria-label": text },
        el("span", { class: "lane-name", text: "search" }), track));
    }
    const slowest = Math.max(0, ...lanes.map((e) => e.finished ?? 0));
    $("timeline-note").textContent = kept.finalized != null
      ? `Final answer at ${seconds(kept.finalized)} (${kept.finalized_by}); the slowest platform ended at ${seconds(slowest)}; 0 to ${seconds(span)}.`
      : `Running: ${seconds(now)} so far.`;
    $("timeline").hidden = lanes.length === 0;
  }

  function renderProblems(view) {
    const list = clear($("problems"));
    for (const e of view.errors || []) {
      list.append(el("li", { class: "failed-platform", "data-platform": e.platform, text: `${e.platform} ${e.state}: ${e.error}` }));
    }
    for (const run of view.platform_runs || []) {
      for (const f of run.failed_queries || []) {
        list.append(el("li", { class: "failed-query", text: `${f.platform}: query ${f.query_index + 1} “${f.query}” failed: ${f.error}` }));
      }
      for (const [option, use] of Object.entries(run.options || {})) {
        if (use.applied === "not_applied") {
          list.append(el("li", { class: "option-note", text: `${run.name}: ${option} not applied (the provider has no such parameter)` }));
        }
      }
      for (const [cap, cut] of Object.entries(run.limits || {})) {
        list.append(el("li", { class: "limit-note", text: `${run.name}: ${cap} cap ${cut.cap} reached, ${cut.skipped} skipped` }));
      }
    }
    for (const [option, count] of Object.entries(view.filtered || {})) {
      list.append(el("li", { class: "filtered", "data-option": option, text: `${option} filtered out ${count} result${count === 1 ? "" : "s"}` }));
    }
    if (view.rerank && !view.rerank.applied && view.rerank.error) {
      list.append(el("li", { class: "rerank-note", text: `rerank (${view.rerank.method}) not applied: ${view.rerank.error}` }));
    }
    if (view.error) list.append(el("li", { class: "task-error", text: `search error: ${view.error}` }));
    $("problems-section").hidden = !list.childElementCount;
  }

  function renderResults(view, terminal) {
    const box = clear($("results"));
    const note = $("results-note");
    let source = null;
    if (terminal) {
      source = view;
      note.textContent = `Final: ${(view.results || []).length} result(s), fused by ${view.fusion}${view.rerank && view.rerank.applied ? `, reranked (${view.rerank.method})` : ""}.`;
      box.dataset.kind = "final";
    } else if (view.preview) {
      source = view.preview;
      note.textContent = `Preview, not final: fused from ${view.preview.platforms.join(", ")} so far.`;
      box.dataset.kind = "preview";
    } else {
      $("results-section").hidden = true;
      return;
    }
    $("results-section").hidden = false;
    const byQuery = source.results_by_query || [];
    if (byQuery.length > 1) {
      byQuery.forEach((group, i) => {
        const headingId = `query-heading-${i}`;
        const section = el("section", { class: "query-section", "aria-labelledby": headingId },
          el("h3", { id: headingId, text: `Query ${i + 1}: ${group.query}` }));
        section.append(resultList(group.results || []));
        for (const f of group.failed || []) {
          section.append(el("p", { class: "failed-query", text: `failed on ${f.platform}: ${f.error}` }));
        }
        box.append(section);
      });
    } else {
      box.append(resultList(source.results || []));
    }
    if (terminal && !(source.results || []).length && !byQuery.some((g) => (g.results || []).length)) {
      box.append(el("p", { class: "note", text: "No results." }));
    }
  }

  function resultList(results) {
    const list = el("ol", { class: "results" });
    for (const r of results) list.append(resultItem(r));
    return list;
  }

  function resultItem(r) {
    const title = r.title || r.url;
    const heading = el("h4", { class: "result-title" });
    if (isWebUrl(r.url)) {
      heading.append(el("a", { href: r.url, rel: "noopener noreferrer nofollow", target: "_blank", text: title }));
    } else {
      heading.textContent = title;
    }
    const provenance = (r.platforms || []).map((p) => `${p} #${(r.ranks || {})[p] ?? "?"}`).join(", ");
    const item = el("li", { class: "result", "data-url": r.url },
      heading,
      el("div", { class: "result-url", text: r.url }),
      r.snippet ? el("p", { class: "snippet", text: r.snippet }) : null,
      el("p", { class: "provenance" }, el("span", { class: "label", text: "from " }), el("span", { class: "sources", text: provenance })),
    );
    const meta = [];
    if (r.published_at) meta.push(`published ${String(r.published_at).slice(0, 10)}`);
    if (r.language) meta.push(`language ${r.language}`);
    if (typeof r.score === "number") meta.push(`score ${r.score.toFixed(4)}`);
    if (meta.length) item.append(el("p", { class: "meta", text: meta.join(" · ") }));
    const variants = r.variants || [];
    if (variants.length > 1) {
      item.append(el("details", { class: "variants" },
        el("summary", { text: `${variants.length} URL variants merged` }),
        el("ul", {}, ...variants.map((v) => el("li", { text: `${v.url} — ${(v.platforms || []).join(", ")}` })))));
    }
    if (r.content) {
      item.append(el("details", { class: "content" },
        el("summary", { text: `Page content (${r.content.length} characters)` }),
        el("div", { class: "content-text", text: r.content })));
    } else if (r.content_id) {
      item.append(el("p", { class: "meta", text: `content stored apart (${r.content_id})` }));
    }
    return item;
  }

  // The cost receipt (wire/cost.py), when the document has one: the total and its estimate, the
  // budget it ran under, one row per platform, the platforms the budget trimmed. Any field this
  // page does not know yet is still shown, by its shape, never hidden.
  const COST_FIELDS = new Set(["platforms", "total_usd", "estimate_usd", "budget", "trimmed", "currency"]);

  function usd(amount) {
    const n = Number(amount);
    if (!Number.isFinite(n) || n === 0) return "$0";
    return `$${n.toFixed(4).replace(/0+$/, "").replace(/\.$/, "")}`;
  }

  function renderCost(cost) {
    const box = clear($("cost"));
    if (cost === undefined || cost === null) {
      $("cost-section").hidden = true;
      return;
    }
    $("cost-section").hidden = false;
    if (typeof cost !== "object" || Array.isArray(cost)) {
      box.append(valueNode(cost));
      return;
    }
    const currency = cost.currency && cost.currency !== "USD" ? ` ${cost.currency}` : "";
    if ("total_usd" in cost) {
      const estimate = "estimate_usd" in cost ? ` (estimated ${usd(cost.estimate_usd)} at the start)` : "";
      box.append(el("p", { id: "cost-total", class: "cost-total" },
        el("strong", { text: "Total " }), el("span", { class: "amount", text: `${usd(cost.total_usd)}${currency}` }), estimate));
    }
    const budget = cost.budget || {};
    const limits = [];
    if (typeof budget.max_cost_usd === "number") limits.push(`cap ${usd(budget.max_cost_usd)} per search (${budget.source || "set"}, ${budget.policy || "refuse"})`);
    if (typeof budget.daily_budget_usd === "number") {
      const spent = typeof budget.daily_spent_usd === "number" ? `, ${usd(budget.daily_spent_usd)} spent before this search` : "";
      limits.push(`daily budget ${usd(budget.daily_budget_usd)}${spent}`);
    }
    if (limits.length) box.append(el("p", { class: "note cost-budget", text: `Budget: ${limits.join("; ")}.` }));
    const platforms = Object.entries(cost.platforms || {});
    if (platforms.length) {
      box.append(el("table", { class: "cost-table", id: "cost-platforms" },
        el("caption", { class: "visually-hidden", text: "Cost per platform" }),
        el("thead", {}, el("tr", {}, ...["Platform", "Calls", "Cost", "Estimate"].map((h) => el("th", { scope: "col", text: h })))),
        el("tbody", {}, ...platforms.map(([name, p]) => el("tr", { "data-platform": name },
          el("th", { scope: "row", text: name }),
          el("td", { text: String((p && p.calls) ?? 0) }),
          el("td", { text: usd(p && p.usd) }),
          el("td", { text: usd(p && p.estimate_usd) }))))));
    }
    if ((cost.trimmed || []).length) {
      box.append(el("p", { class: "cost-trimmed", text: `Dropped to fit the budget: ${cost.trimmed.join(", ")}.` }));
    }
    const rest = Object.fromEntries(Object.entries(cost).filter(([k]) => !COST_FIELDS.has(k)));
    if (Object.keys(rest).length) box.append(valueNode(rest));
  }

  function valueNode(value) {
    if (value === null || value === undefined) return document.createTextNode("—");
    if (Array.isArray(value)) {
      if (value.length && value.every((v) => v && typeof v === "object" && !Array.isArray(v))) {
        const keys = [...new Set(value.flatMap((v) => Object.keys(v)))];
        return el("table", {},
          el("thead", {}, el("tr", {}, ...keys.map((k) => el("th", { scope: "col", text: k })))),
          el("tbody", {}, ...value.map((row) => el("tr", {}, ...keys.map((k) => el("td", {}, valueNode(row[k])))))));
      }
      return el("ul", {}, ...value.map((v) => el("li", {}, valueNode(v))));
    }
    if (typeof value === "object") {
      const list = el("dl", { class: "kv" });
      for (const [k, v] of Object.entries(value)) list.append(el("dt", { text: k }), el("dd", {}, valueNode(v)));
      return list;
    }
    return document.createTextNode(String(value));
  }

  // ------------------------------------------------------------------------------------------
  // Wiring.

  // page/config.json: where the calls go. Without one (an older server) serve's routes stand.
  async function loadConfig() {
    try {
      const response = await fetch("page/config.json", { cache: "no-store" });
      if (response.ok) config = Object.assign({}, config, await response.json());
    } catch {
      // keep the defaults
    }
  }

  async function init() {
    await loadConfig();
    $("api-link").href = new URL(`${config.search_status}/openapi.json`, document.baseURI).href;
    $("key-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const key = $("api-key").value.trim();
      if (!key) {
        setKeyNote(state.key ? "Key unchanged." : "Type a key first.");
        return;
      }
      useKey(key);
      loadPlatforms();
    });
    $("key-forget").addEventListener("click", () => {
      useKey(null);
      loadPlatforms();
    });
    $("search-form").addEventListener("submit", startSearch);
    $("search-form").addEventListener("input", updateRequest);
    $("search-form").addEventListener("change", updateRequest);
    $("queries").addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        $("search-form").requestSubmit();
      }
    });
    $("cancel-button").addEventListener("click", cancelSearch);
    $("copy-json").addEventListener("click", () => copy($("request-json").textContent, "The request JSON"));
    $("copy-curl").addEventListener("click", () => copy($("request-curl").textContent, "The curl command"));
    const saved = sessionStorage.getItem(KEY_STORAGE);
    useKey(saved);
    updateRequest();
    loadPlatforms();
    document.body.dataset.ready = "true";
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
