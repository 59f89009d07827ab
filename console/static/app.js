// agentq console: confirmations and auto-refresh. The pages work without it.
(function () {
  "use strict";

  // Forms with data-confirm ask first.
  document.addEventListener("submit", function (e) {
    var f = e.target;
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
