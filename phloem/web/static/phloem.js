// phloem web view: follow the server-sent events and swap in each section's new HTML.
// No framework, no build step: the server renders every fragment.
(function () {
  "use strict";
  var wanted = (document.body.dataset.sections || "").split(",").filter(Boolean);
  var conn = document.getElementById("conn");
  if (!wanted.length || !window.EventSource) { return; }
  var source = new EventSource("/events?sections=" + encodeURIComponent(wanted.join(",")));
  wanted.forEach(function (name) {
    source.addEventListener(name, function (event) {
      var section = document.getElementById("s-" + name);
      if (!section) { return; }
      section.innerHTML = event.data;
      section.dataset.updatedAt = String(Date.now());
    });
  });
  source.onopen = function () { conn.textContent = "live"; conn.className = "conn live"; };
  source.onerror = function () { conn.textContent = "reconnecting…"; conn.className = "conn"; };
})();
