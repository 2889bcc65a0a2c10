// qita board's own script: keyboard navigation between steps, lane jumps to steps not
// yet loaded, and the two pieces of live updating htmx cannot express alone. It never
// builds HTML from strings: trace data reaches the page only through server-escaped
// templates.
(function () {
  "use strict";
  function steps() { return Array.prototype.slice.call(document.querySelectorAll("article.step")); }
  function currentIndex(list) {
    var cur = document.querySelector("article.step.current");
    if (cur) return list.indexOf(cur);
    var y = window.scrollY + 80;
    for (var i = 0; i < list.length; i++) { if (list[i].offsetTop >= y) return i - 1; }
    return list.length - 1;
  }
  function select(el) {
    steps().forEach(function (s) { s.classList.remove("current"); });
    el.classList.add("current");
    el.focus({ preventScroll: true });
    el.scrollIntoView({ block: "start" });
    if (history.replaceState) history.replaceState(history.state, "", "#" + el.id);
  }
  function go(delta) {
    var list = steps();
    if (!list.length) return;
    var i = Math.max(0, Math.min(list.length - 1, currentIndex(list) + delta));
    select(list[i]);
  }
  document.addEventListener("keydown", function (ev) {
    if (ev.defaultPrevented || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    var t = ev.target;
    if (t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT" || t.isContentEditable)) return;
    if (ev.key === "j") { go(1); ev.preventDefault(); }
    else if (ev.key === "k") { go(-1); ev.preventDefault(); }
  });

  // A lane mark names a step: scroll to it when loaded, else open the run from that step.
  document.addEventListener("click", function (ev) {
    var mark = ev.target.closest ? ev.target.closest("a.mark[data-step]") : null;
    if (!mark || ev.ctrlKey || ev.metaKey || ev.shiftKey || ev.button !== 0) return;
    ev.preventDefault();
    var el = document.getElementById("step-" + mark.dataset.step);
    if (el) { select(el); return; }
    var url = new URL(window.location.href);
    url.searchParams.set("from", mark.dataset.step);
    url.hash = "step-" + mark.dataset.step;
    window.location.assign(url.toString());
  });
  window.addEventListener("load", function () {
    var m = /^#step-(\d+)$/.exec(window.location.hash);
    var el = m && document.getElementById("step-" + m[1]);
    if (el) el.classList.add("current");
  });

  // Live run page: tell the server the last step shown so it appends only newer ones
  // (none while a lazy-loading block is still pending below).
  document.addEventListener("htmx:configRequest", function (ev) {
    var elt = ev.detail.elt;
    if (!elt || elt.id !== "live" || elt.dataset.live !== "run") return;
    if (document.querySelector("#steps .more-steps")) return;
    var list = document.querySelectorAll("#steps article.step");
    ev.detail.parameters.after = list.length ? list[list.length - 1].dataset.step : "-1";
  });
  // Live runs list: the poller fires this event when runs changed; reload only the table.
  document.body && init();
  function init() {
    document.body.addEventListener("qita-runs-changed", function () {
      if (window.htmx && document.getElementById("results")) {
        window.htmx.ajax("GET", window.location.pathname + window.location.search, { target: "#results", swap: "innerHTML" });
      }
    });
  }
  if (!document.body) document.addEventListener("DOMContentLoaded", init);
})();
