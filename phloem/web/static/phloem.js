// phloem web view: follow the server-sent events and swap in each section's new HTML.
// No framework, no build step: the server renders every fragment (plots are inline SVG).
(function () {
  "use strict";
  var body = document.body;
  var wanted = (body.dataset.sections || "").split(",").filter(Boolean);
  var conn = document.getElementById("conn");
  var streaming = false;

  // The badge says "live" only while both the stream and the daemon are there.
  function badge() {
    var mark = document.querySelector("#s-summary [data-daemon]");
    var daemon = mark ? mark.getAttribute("data-daemon") : "";
    if (!streaming) {
      conn.textContent = "web view unreachable, reconnecting…";
      conn.className = "conn down";
    } else if (daemon === "disconnected") {
      var since = Number(mark.getAttribute("data-since") || 0);
      var at = since ? new Date(since * 1000).toISOString().slice(11, 19) + " UTC" : "";
      conn.textContent = "daemon disconnected" + (at ? " since " + at : "");
      conn.className = "conn down";
    } else {
      conn.textContent = "live";
      conn.className = "conn live";
    }
  }

  // The Runs page's filter (?kind=&status=) holds for every update.
  function filterRuns(section) {
    var kind = body.dataset.filterKind || "", status = body.dataset.filterStatus || "";
    if (!kind && !status) { return; }
    section.querySelectorAll("article.run").forEach(function (run) {
      run.hidden = (kind && run.dataset.kind !== kind) || (status && run.dataset.state !== status);
    });
  }

  if (!wanted.length || !window.EventSource) { return; }
  var source = new EventSource("/events?sections=" + encodeURIComponent(wanted.join(",")));
  wanted.forEach(function (name) {
    source.addEventListener(name, function (event) {
      var section = document.getElementById("s-" + name);
      if (!section) { return; }
      var form = section.querySelector("form.filter");
      section.innerHTML = event.data;
      if (name === "runs") {
        if (form) { section.insertBefore(form, section.firstChild); }
        filterRuns(section);
      }
      section.dataset.updatedAt = String(Date.now());
      if (name === "summary") { badge(); }
    });
  });
  source.onopen = function () { streaming = true; badge(); };
  source.onerror = function () { streaming = false; badge(); };
})();
