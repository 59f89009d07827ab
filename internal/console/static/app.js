// agentq console: confirmations and auto-refresh. The pages work without it.
(function () {
  "use strict";

  // A signal form sends only JSON (the server checks it too).
  function badSignal(f) {
    var ta = f.querySelector("textarea[name=data]"), msg = f.querySelector(".signal-error");
    var v = ta ? ta.value.trim() : "";
    try {
      if (v !== "") { JSON.parse(v); }
    } catch (err) {
      if (msg) { msg.textContent = "Not sent: the data is not JSON (" + err.message + "). Write JSON, or leave it blank for null."; }
      ta.focus();
      return true;
    }
    if (msg) { msg.textContent = ""; }
    return false;
  }

  // Forms with data-confirm ask first.
  document.addEventListener("submit", function (e) {
    var f = e.target;
    if (f && f.classList && f.classList.contains("signal") && badSignal(f)) {
      e.preventDefault();
      return;
    }
    if (f && f.dataset && f.dataset.confirm && !window.confirm(f.dataset.confirm)) {
      e.preventDefault();
    }
  });

  // A flash message belongs to the page it was shown on: drop its
  // parameters from the address so reloads and shared links are clean.
  try {
    var u = new URL(window.location.href);
    if (u.searchParams.has("done")) {
      ["done", "id", "n", "failed", "key", "for", "more"].forEach(function (k) { u.searchParams.delete(k); });
      window.history.replaceState(null, "", u.pathname + (u.search || "") + u.hash);
    }
  } catch (err) { /* old browser: keep the address */ }

  // What a waiting event's wait waits for (as the page's "waitfor").
  function waitText(w) {
    var t = w.kind === "signal" ? "signal " + w.signal : w.kind === "sleep" ? "sleep " + w.sleep :
      w.kind === "until" ? "until " + timeText(w.until) : w.kind;
    if (w.timeout !== undefined) { t += ", timeout " + w.timeout + (typeof w.timeout === "number" ? "s" : ""); }
    if (w.due) { t += " · due " + timeText(w.due); }
    return t;
  }

  // An event's time (RFC 3339 with nanoseconds, UTC) as the page writes
  // times, with milliseconds: "2026-01-02 15:04:05.123Z"; local time on
  // hover.
  function dateOf(at) {
    var d = new Date(String(at).replace(/(\.\d{3})\d+/, "$1"));
    return isNaN(d.getTime()) ? null : d;
  }
  function timeText(at) {
    var d = dateOf(at);
    return d ? d.toISOString().replace("T", " ") : String(at);
  }
  function timeOf(at) {
    var el = document.createElement("time");
    el.setAttribute("datetime", at);
    el.textContent = timeText(at);
    var d = dateOf(at);
    if (d) { el.title = d.toLocaleString(undefined, { hour12: false }) + " (local)"; }
    return el;
  }

  // The task's state, in the title's badge and the State field alike.
  function setState(state) {
    var st = document.getElementById("task-state");
    if (st) { st.textContent = state; }
    var badge = document.getElementById("task-badge");
    if (badge) {
      badge.textContent = state;
      badge.className = "badge st-" + state;
    }
  }

  // A live task's events, as they are recorded (Server-Sent Events);
  // the page then does not refresh itself.
  var live = document.getElementById("live");
  if (live && window.EventSource) {
    var list = document.getElementById("live-events");
    var status = document.getElementById("live-status");
    var ended = false;
    var es = new EventSource(live.getAttribute("data-events"));
    status.textContent = "Connecting…";
    es.onopen = function () { if (!ended) { status.textContent = "Live: new events appear here as they are recorded."; } };
    es.onerror = function () { if (!ended) { status.textContent = "Reconnecting…"; } };
    var add = function (e) {
      var ev;
      try { ev = JSON.parse(e.data); } catch (err) { return; }
      var li = document.createElement("li");
      li.setAttribute("data-seq", e.lastEventId);
      li.appendChild(document.createTextNode("#" + e.lastEventId + " "));
      if (ev.at) { li.appendChild(timeOf(ev.at)); }
      var text = " " + e.type;
      if (ev.attempt) { text += " attempt " + ev.attempt; }
      if (ev.name) { text += " " + ev.name; }
      if (ev.bytes) { text += " (" + ev.bytes + " B)"; }
      if (ev.wait) { text += " " + waitText(ev.wait); }
      if (ev.resume) { text += " resume " + ev.resume + (ev.by ? " by " + ev.by : ""); }
      if (ev.usage && ev.usage.total_tokens) { text += " " + ev.usage.total_tokens + " tokens"; }
      if (ev.error_class) { text += " " + ev.error_class; }
      if (ev.error) { text += ": " + ev.error; }
      if (ev.reason) { text += " (" + ev.reason + ")"; }
      if (ev.data !== undefined) { text += " " + JSON.stringify(ev.data); }
      li.appendChild(document.createTextNode(text));
      list.appendChild(li);
      if (e.type === "succeeded" || e.type === "dead_lettered" || e.type === "task_canceled") {
        ended = true;
        es.close();
        setState(e.type === "task_canceled" ? "canceled" : e.type);
        // An ended task can no longer be canceled or signaled.
        document.querySelectorAll('form[action$="/cancel"], #signal').forEach(function (el) { el.remove(); });
        status.textContent = "The task has ended: reload the page for its full record, output and progress.";
      } else if (e.type === "waiting" || e.type === "resumed") {
        setState(e.type === "waiting" ? "waiting" : "active");
      }
    };
    ["queued", "scheduled", "succeeded", "failed", "retrying", "deferred", "restarting", "dead_lettered",
      "requeued", "interrupted", "task_canceled", "history_elided", "progress", "output", "output_truncated", "step",
      "waiting", "resumed", "signal"
    ].forEach(function (name) { es.addEventListener(name, add); });
    return;
  }

  var secs = parseInt(document.body.getAttribute("data-refresh") || "0", 10);
  if (!secs || !window.fetch || !window.DOMParser) { return; }

  function busy() {
    var a = document.activeElement;
    if (a && a !== document.body && /^(INPUT|SELECT|TEXTAREA|BUTTON)$/.test(a.tagName)) { return true; }
    return document.hidden;
  }

  function refresh() {
    if (busy()) { return; }
    fetch(window.location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) {
        if (!r.ok || r.redirected) { return null; }
        return r.text();
      })
      .then(function (html) {
        if (!html || busy()) { return; }
        var doc = new DOMParser().parseFromString(html, "text/html");
        ["main", "footer"].forEach(function (sel) {
          var fresh = doc.querySelector(sel), cur = document.querySelector(sel);
          if (fresh && cur) { cur.replaceWith(document.adoptNode(fresh)); }
        });
        var flash = document.querySelector("main .flash[role=status]");
        if (flash) { flash.remove(); }
      })
      .catch(function () { /* offline for a moment: try again next time */ });
  }

  window.setInterval(refresh, secs * 1000);
})();
