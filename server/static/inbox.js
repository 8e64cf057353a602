// lf-handoff inbox: live updates and countdowns. No build step; every
// action also works as a plain form without this script.
"use strict";

(function () {
  // Deadlines as countdowns, urgent in the last 15 minutes.
  function span(ms) {
    var s = Math.round(Math.abs(ms) / 1000);
    if (s < 60) return s + "s";
    var m = Math.floor(s / 60);
    if (m < 60) return m + "m " + (s % 60) + "s";
    var h = Math.floor(m / 60);
    if (h < 48) return h + "h " + (m % 60) + "m";
    return Math.floor(h / 24) + "d " + (h % 24) + "h";
  }
  function tick() {
    var now = Date.now();
    document.querySelectorAll("[data-deadline]").forEach(function (el) {
      var left = Number(el.getAttribute("data-deadline")) - now;
      el.textContent = left > 0 ? "due in " + span(left) : "overdue by " + span(left);
      el.classList.toggle("urgent", left < 15 * 60 * 1000);
    });
  }
  tick();
  setInterval(tick, 1000);

  // The copy buttons (shown only when the script runs).
  document.querySelectorAll("button[data-copy]").forEach(function (button) {
    var source = document.getElementById(button.getAttribute("data-copy"));
    if (!source || !navigator.clipboard) return;
    button.hidden = false;
    button.addEventListener("click", function () {
      navigator.clipboard.writeText(source.textContent).then(function () {
        button.textContent = "Copied";
      });
    });
  });

  // The inbox: on every event of the history, the rows are read again
  // (server-rendered, escaped) and replaced.
  var list = document.getElementById("handoffs");
  if (!list || !window.EventSource) return;
  var url = list.getAttribute("data-rows");
  var pending = false, again = false;
  function refresh() {
    if (pending) { again = true; return; }
    pending = true;
    fetch(url, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (response) {
        if (!response.ok) throw new Error(response.status);
        return response.text();
      })
      .then(function (html) {
        var before = {};
        list.querySelectorAll("[data-id]").forEach(function (el) {
          before[el.getAttribute("data-id")] = true;
        });
        var parsed = new DOMParser().parseFromString("<ul>" + html + "</ul>", "text/html");
        var next = parsed.body.firstChild;
        list.replaceChildren.apply(list, Array.prototype.slice.call(next.childNodes));
        list.querySelectorAll("[data-id]").forEach(function (el) {
          if (!before[el.getAttribute("data-id")]) el.classList.add("fresh");
        });
        tick();
      })
      .catch(function () {})
      .then(function () {
        pending = false;
        if (again) { again = false; refresh(); }
      });
  }
  var events = new EventSource("/v1/events");
  var live = document.getElementById("live");
  events.onopen = function () {
    if (live) live.hidden = false;
    list.setAttribute("data-live", "true");
    refresh();
  };
  events.onmessage = refresh;
  events.onerror = function () { if (live) live.hidden = true; };
})();
