// Compare page: "Copy as Markdown", and the grouping form that keeps the pairs' sort and filter.
// "Copy as Markdown" fetches the comparison as Markdown from the board and
// puts it on the clipboard. Where the browser refuses the clipboard (a page served over
// plain http from another host), the text is shown in a box to copy by hand. The text
// only ever goes into the clipboard or a textarea's value, never into the page as HTML.
(function () {
  "use strict";
  function say(button, text) {
    var status = document.getElementById(button.dataset.status);
    if (status) status.textContent = text;
  }
  function fallback(button, text) {
    var box = document.getElementById(button.dataset.fallback);
    if (!box) return;
    box.hidden = false;
    box.value = text;
    box.focus();
    box.select();
    say(button, "Select all and copy: the browser did not allow the clipboard here.");
  }
  document.addEventListener("click", function (ev) {
    var button = ev.target.closest ? ev.target.closest("button[data-copy-url]") : null;
    if (!button) return;
    ev.preventDefault();
    say(button, "Copying…");
    fetch(button.dataset.copyUrl, { credentials: "same-origin", headers: { "Accept": "text/markdown" } })
      .then(function (r) {
        if (!r.ok) throw new Error("the board answered " + r.status);
        return r.text();
      })
      .then(function (text) {
        button.dataset.copied = text.length;
        if (navigator.clipboard && window.isSecureContext) {
          return navigator.clipboard.writeText(text).then(function () {
            say(button, "Copied " + text.split("\n").length + " lines of Markdown.");
          }, function () { fallback(button, text); });
        }
        fallback(button, text);
      })
      .catch(function (err) { say(button, "Could not copy: " + err.message); });
  });
  // The pairs' sort and filter change in place (htmx swaps the table and the URL), so the
  // grouping form's copies of them, written when the page was built, are brought up to
  // date as it is sent: grouping keeps the pairs as the reader left them.
  document.addEventListener("submit", function (ev) {
    var form = ev.target;
    var pairs = document.getElementById("pair-controls");
    if (!form || form.id !== "group-form" || !pairs) return;
    var now = new FormData(pairs);
    ["sort", "only"].forEach(function (name) {
      form.querySelectorAll("input[type=hidden][name=" + name + "]").forEach(function (old) { old.remove(); });
      var value = now.get(name);
      if (!value || (name === "sort" && value === "task")) return;
      var input = document.createElement("input");
      input.type = "hidden";
      input.name = name;
      input.value = value;
      form.appendChild(input);
    });
  });
})();
