// qita board's own script: keyboard navigation between steps (loading the next or
// earlier block at either end), the previous / next buttons that do what n / p do, links
// to steps not yet loaded, and the two pieces of live updating htmx cannot express alone. It never builds HTML from strings: trace
// data reaches the page only through server-escaped templates.
(function () {
  "use strict";
  function steps() { return Array.prototype.slice.call(document.querySelectorAll("article.step")); }
  function visible(el) {
    var r = el.getBoundingClientRect();
    return r.bottom > 0 && r.top < window.innerHeight;
  }
  // What the sticky bars cover at the top of the window: the top bar, and on a run page the
  // previous / next bar once it is shown.
  function covered() {
    var bar = document.querySelector(".topbar");
    var nav = document.getElementById("walk-nav");
    return (bar ? bar.offsetHeight : 0) + (nav && !nav.hidden ? nav.offsetHeight : 0);
  }
  // The step's scroll-margin-top (app.css) is computed from these two heights.
  function measureBars() {
    var root = document.documentElement;
    var bar = document.querySelector(".topbar");
    var nav = document.getElementById("walk-nav");
    if (bar) root.style.setProperty("--topbar-h", bar.offsetHeight + "px");
    if (nav && !nav.hidden) root.style.setProperty("--walk-h", nav.offsetHeight + "px");
  }
  function atBottom() {
    return window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 2;
  }
  // The step the reader is on: the selected one while it is in view; at the very bottom of
  // the page the last step in view (the page cannot scroll further to bring it to the top);
  // else the last step whose top has passed the top of the window.
  function currentIndex(list) {
    var cur = document.querySelector("article.step.current");
    if (cur && visible(cur)) return list.indexOf(cur);
    if (atBottom()) {
      for (var j = list.length - 1; j >= 0; j--) { if (list[j].getBoundingClientRect().top < window.innerHeight) return j; }
    }
    var y = window.scrollY + Math.max(80, covered() + 24);
    for (var i = 0; i < list.length; i++) { if (list[i].offsetTop >= y) return i - 1; }
    return list.length - 1;
  }
  // A collapsed step opens where it is; one opened only because the reader walked onto it
  // folds again when they walk on, so walking a long run does not leave a trail open.
  function unfold(el) {
    var fold = el.querySelector("details.step-fold");
    if (fold && !fold.open) { fold.open = true; el.dataset.autoOpened = "1"; }
  }
  // keepFocus: the previous / next button that asked keeps the focus, so it can be pressed again.
  function select(el, keepFocus) {
    steps().forEach(function (s) {
      if (s === el) return;
      if (s.classList.contains("current") && s.dataset.autoOpened) {
        var fold = s.querySelector("details.step-fold");
        if (fold) fold.open = false;
        delete s.dataset.autoOpened;
      }
      s.classList.remove("current");
    });
    el.classList.add("current");
    unfold(el);
    if (!keepFocus) el.focus({ preventScroll: true });
    // The step's scroll-margin-top (app.css) keeps its header below the sticky bar.
    el.scrollIntoView({ block: "start" });
    if (history.replaceState) history.replaceState(history.state, "", "#" + el.id);
  }
  // n / p: the next or previous step worth a look (the page lists them in data-flagged:
  // the chosen kinds, or every kind when the list is not filtered; a live poll replaces
  // #walk-marks, so steps written while the page is open count too).
  function flagged() {
    var holder = document.getElementById("walk-marks") || document.getElementById("steps-section");
    var text = holder ? (holder.dataset.flagged || "") : "";
    return text ? text.split(" ").map(Number) : [];
  }
  function jump(delta, button) {
    var marks = flagged();
    if (!marks.length) return;
    // From the selected step, else from where the reader is: the top of the page is
    // before the first step.
    var list = steps();
    var i = list.length && window.scrollY > 8 || document.querySelector("article.step.current") ? currentIndex(list) : -1;
    var cur = i >= 0 ? Number(list[i].dataset.step) : -1;
    var target = null;
    if (delta > 0) { for (var a = 0; a < marks.length; a++) { if (marks[a] > cur) { target = marks[a]; break; } } }
    else { for (var b = marks.length - 1; b >= 0; b--) { if (marks[b] < cur) { target = marks[b]; break; } } }
    if (target === null) return;
    var el = document.getElementById("step-" + target);
    if (el) { select(el, !!button); return; }
    if (button) remember(WALK_FOCUS, delta > 0 ? "next" : "prev");
    openAt(target);
  }
  // A previous / next button that opened the run elsewhere has the focus again there.
  var WALK_FOCUS = "qita-walk-focus";
  var FILTER_FOCUS = "qita-filter-focus";
  function remember(key, value) {
    try { window.sessionStorage.setItem(key, value); } catch (e) { /* storage off: the focus is lost, nothing else */ }
  }
  function recall(key) {
    try { var v = window.sessionStorage.getItem(key); window.sessionStorage.removeItem(key); return v; } catch (e) { return null; }
  }
  function setupWalk() {
    var nav = document.getElementById("walk-nav");
    if (!nav || document.body.classList.contains("export")) { measureBars(); return; }
    nav.hidden = false;
    measureBars();
    nav.addEventListener("click", function (ev) {
      var button = ev.target.closest ? ev.target.closest("button[data-walk]") : null;
      if (!button || button.disabled) return;
      jump(Number(button.dataset.walk), button);
    });
    var again = recall(WALK_FOCUS);
    var button = again ? nav.querySelector(again === "next" ? ".walk-next" : ".walk-prev") : null;
    if (button) {
      // The browser focuses the step a #step-N link names once the page has loaded: the
      // button takes the focus back then (the step stays the current one).
      var refocus = function () { button.focus({ preventScroll: true }); };
      refocus();
      if (document.readyState !== "complete") window.addEventListener("load", refocus, { once: true });
    }
    window.addEventListener("resize", measureBars);
    // A live poll brings new steps worth a look (#walk-marks): the buttons follow them.
    document.addEventListener("htmx:afterSettle", function () {
      var none = !flagged().length;
      nav.querySelectorAll("button[data-walk]").forEach(function (b) { b.disabled = none; });
    });
  }
  // Open the run from step n (the server renders the block holding it) and land on it.
  function openAt(n) {
    var url = new URL(window.location.href);
    url.searchParams.set("from", n);
    url.hash = "step-" + n;
    window.location.assign(url.toString());
  }
  var pendingAfter = null;   // j pressed on the last loaded step: select the next one once loaded
  var pendingMoves = 0;      // ... and how many times: each press while the block loads counts
  function go(delta) {
    var list = steps();
    if (!list.length) return;
    var i = currentIndex(list);
    if (delta > 0 && i >= list.length - 1) {
      var more = document.querySelector("#steps .more-steps");
      if (more) {
        var last = list[list.length - 1].dataset.step;
        pendingMoves = pendingAfter === last ? pendingMoves + 1 : 1;
        pendingAfter = last;
        // Its "revealed" trigger loads the next block (already on its way if it is in view).
        more.scrollIntoView({ block: "end" });
      } else {
        select(list[list.length - 1]);
      }
      return;
    }
    if (delta < 0 && i <= 0) {
      var earlier = document.querySelector("a.earlier-link");
      if (earlier) { window.location.assign(earlier.href); return; }
    }
    select(list[Math.max(0, Math.min(list.length - 1, i + delta))]);
  }
  document.addEventListener("htmx:afterSettle", function () {
    if (pendingAfter === null) return;
    var list = steps();
    for (var i = 0; i < list.length; i++) {
      if (list[i].dataset.step === pendingAfter && i + 1 < list.length) {
        var to = Math.min(list.length - 1, i + pendingMoves);
        pendingAfter = null; pendingMoves = 0; select(list[to]); return;
      }
    }
  });
  document.addEventListener("keydown", function (ev) {
    if (ev.defaultPrevented || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    var t = ev.target;
    // Keys typed into a field are its own; a ticked box (the step filter keeps the focus) types nothing.
    var typed = t && t.tagName === "INPUT" && !/^(checkbox|radio|button|submit|reset)$/.test(t.type);
    if (t && (typed || t.tagName === "TEXTAREA" || t.tagName === "SELECT" || t.isContentEditable)) return;
    if (ev.key === "j") { go(1); ev.preventDefault(); }
    else if (ev.key === "k") { go(-1); ev.preventDefault(); }
    else if (ev.key === "n") { jump(1); ev.preventDefault(); }
    else if (ev.key === "p") { jump(-1); ev.preventDefault(); }
  });

  // "show all" is a link (without JavaScript it opens the whole value on its own page)
  // acting as a button: Space presses it too, and the value it brings takes its focus,
  // so a keyboard reader goes on from there instead of from the top of the page.
  document.addEventListener("keydown", function (ev) {
    var t = ev.target;
    if (ev.key === " " && t && t.tagName === "A" && t.getAttribute("role") === "button") { ev.preventDefault(); t.click(); }
  });
  // A pager's link is swapped away with the table it pages: its focus fell to <body>, and a
  // keyboard reader started again from the top. The same link of the new pager takes it
  // (the other one when the end was reached: "next" is gone on the last page).
  var paged = null;
  document.addEventListener("click", function (ev) {
    var link = ev.target.closest ? ev.target.closest(".pager a[hx-get], .pairs-pager a[hx-get]") : null;
    paged = link ? { text: link.textContent.trim(), pager: link.closest(".pager") ? ".pager" : ".pairs-pager" } : null;
  });
  document.addEventListener("htmx:afterSettle", function () {
    if (!paged) return;
    var was = paged;
    paged = null;
    if (document.activeElement && document.activeElement !== document.body) return;
    var links = Array.prototype.slice.call(document.querySelectorAll(was.pager + " a"));
    var same = links.filter(function (a) { return a.textContent.trim() === was.text; })[0] || links[0];
    if (same) same.focus({ preventScroll: true });
  });
  document.addEventListener("htmx:afterSettle", function () {
    var el = document.querySelector("[data-focus-after-swap]");
    if (!el) return;
    el.removeAttribute("data-focus-after-swap");
    if (!document.activeElement || document.activeElement === document.body) el.focus({ preventScroll: true });
  });

  // A lane mark or a step's own link names a step: scroll to it when loaded, else open
  // the run from that step (the link's href says the same, so a copied link works too).
  document.addEventListener("click", function (ev) {
    var link = ev.target.closest ? ev.target.closest("a.mark[data-step], a.step-link[data-step], a.step-ref[data-step]") : null;
    if (!link || ev.ctrlKey || ev.metaKey || ev.shiftKey || ev.button !== 0) return;
    if (document.body.classList.contains("export")) return;
    ev.preventDefault();
    var el = document.getElementById("step-" + link.dataset.step);
    if (el) { select(el); return; }
    openAt(link.dataset.step);
  });
  // A link to a step this page does not hold (a reload of #step-2999, a shared link):
  // open the run from that step, once (a step that does not exist stops there).
  // A run opened past its last step (?from=9999) says so above the last steps it shows:
  // the page opens there, the notice under the sticky bars.
  function landOnHash() {
    var m = /^#step-(\d+)$/.exec(window.location.hash);
    if (m && document.getElementById("steps")) {
      var el = document.getElementById("step-" + m[1]);
      if (el) { el.classList.add("current"); unfold(el); el.scrollIntoView({ block: "start" }); return; }
      if (new URL(window.location.href).searchParams.get("from") !== m[1]) { openAt(m[1]); return; }
    }
    var notice = document.getElementById("steps-notice");
    if (notice) notice.scrollIntoView({ block: "start" });
  }
  function onReady() { setupWalk(); landOnHash(); }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", onReady);
  else onReady();

  // A form that shows what its page's address says (templates mark it autocomplete="off",
  // which stops Chrome refilling it on Back with what was picked before it was sent) can
  // still come back from the back/forward cache as it was left: the later page's choices
  // over the earlier page's results. Its defaults are the address's; put them back.
  window.addEventListener("pageshow", function (ev) {
    if (!ev.persisted) return;
    document.querySelectorAll('form[method="get"][autocomplete="off"]').forEach(function (f) { f.reset(); });
  });

  // Live run page: tell the server the last step shown so it appends only newer ones
  // (none while a lazy-loading block is still pending below).
  document.addEventListener("htmx:configRequest", function (ev) {
    var elt = ev.detail.elt;
    if (!elt || elt.id !== "live" || elt.dataset.live !== "run") return;
    if (document.querySelector("#steps .more-steps")) return;
    var list = document.querySelectorAll("#steps article.step");
    ev.detail.parameters.after = list.length ? list[list.length - 1].dataset.step : "-1";
    var holder = document.getElementById("steps");
    if (holder && holder.dataset.only) ev.detail.parameters.only = holder.dataset.only;
  });
  // Live runs list: the poller fires this event when runs changed; reload only the table.
  document.body && init();
  function init() {
    // The step filter applies as soon as a box is ticked; "expand all" needs this script.
    // The page it loads gives the focus back to that box, so Space can be pressed again
    // (it fell to the top of the page).
    document.body.addEventListener("change", function (ev) {
      var box = ev.target;
      if (box && box.name === "only" && box.form && box.form.classList.contains("step-filter")) {
        remember(FILTER_FOCUS, box.value);
        box.form.submit();
      }
    });
    var ticked = recall(FILTER_FOCUS);
    if (ticked !== null) {
      var again = Array.prototype.filter.call(document.querySelectorAll(".step-filter input[name=only]"),
                                              function (b) { return b.value === ticked; })[0];
      if (again) again.focus({ preventScroll: true });
    }
    var expand = document.querySelector(".step-filter .expand-all");
    if (expand) {
      expand.hidden = false;
      expand.addEventListener("click", function () {
        var folds = document.querySelectorAll("#steps details.step-fold");
        var open = expand.dataset.open !== "1";
        folds.forEach(function (f) { f.open = open; });
        expand.dataset.open = open ? "1" : "";
        expand.textContent = open ? "collapse all" : "expand all";
      });
    }
    // The runs list's search box sends itself as it is typed into (htmx: input, after a
    // pause); the change event a browser fires when it loses the focus would send the same
    // address again and push it a second time: Back then stayed on the same list.
    var search = document.getElementById("q");
    if (search && search.form && search.form.id === "filters") {
      search.addEventListener("change", function (ev) { ev.stopPropagation(); });
    }
    document.body.addEventListener("qita-runs-changed", function () {
      if (window.htmx && document.getElementById("results")) {
        // htmx swaps in the server-rendered (escaped) table; its default swap replaces the content.
        window.htmx.ajax("GET", window.location.pathname + window.location.search, { target: "#results" });
      }
    });
  }
  if (!document.body) document.addEventListener("DOMContentLoaded", init);
})();
