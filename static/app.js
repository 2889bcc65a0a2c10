// qita board's own script: keyboard navigation between steps. It never builds HTML
// from strings: trace data reaches the page only through server-escaped templates.
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
  function go(delta) {
    var list = steps();
    if (!list.length) return;
    var i = Math.max(0, Math.min(list.length - 1, currentIndex(list) + delta));
    list.forEach(function (el) { el.classList.remove("current"); });
    list[i].classList.add("current");
    list[i].focus({ preventScroll: true });
    list[i].scrollIntoView({ block: "start" });
    if (history.replaceState) history.replaceState(null, "", "#" + list[i].id);
  }
  document.addEventListener("keydown", function (ev) {
    if (ev.defaultPrevented || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    var t = ev.target;
    if (t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT" || t.isContentEditable)) return;
    if (ev.key === "j") { go(1); ev.preventDefault(); }
    else if (ev.key === "k") { go(-1); ev.preventDefault(); }
  });
})();
