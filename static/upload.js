// Upload page: drag and drop onto the drop zone, and a progress bar while the files go up.
// The form itself is posted by htmx (XMLHttpRequest); this file only reads its progress
// events and sets text with textContent: it never builds HTML from strings.
(function () {
  "use strict";
  var form = document.getElementById("upload-form");
  if (!form) return;
  var input = document.getElementById("files");
  var zone = document.getElementById("drop-zone");
  var bar = document.getElementById("upload-progress");
  var status = document.getElementById("upload-status");
  var chosen = document.getElementById("chosen");

  function showChosen() {
    // Each name in first-strong isolates (U+2068 … U+2069): a right-to-left override in one
    // name ("rlo\u202etxt.jsonl") reversed the rest of the list and faked an extension.
    var names = Array.prototype.map.call(input.files || [], function (f) { return "\u2068" + f.name + "\u2069"; });
    chosen.textContent = names.length ? "chosen: " + names.join(", ") : "";
  }
  input.addEventListener("change", showChosen);

  ["dragenter", "dragover"].forEach(function (name) {
    zone.addEventListener(name, function (ev) { ev.preventDefault(); zone.classList.add("dragging"); });
  });
  ["dragleave", "drop"].forEach(function (name) {
    zone.addEventListener(name, function () { zone.classList.remove("dragging"); });
  });
  zone.addEventListener("drop", function (ev) {
    ev.preventDefault();
    if (!ev.dataTransfer || !ev.dataTransfer.files || !ev.dataTransfer.files.length) return;
    input.files = ev.dataTransfer.files;
    showChosen();
    form.requestSubmit();
  });

  // While the files are being sent, leaving the page drops them, and the board never sees
  // them (nothing is stored of an upload cut off): the browser asks first. Once the board
  // has answered, reading goes on there whatever this page does.
  var sending = false;
  window.addEventListener("beforeunload", function (ev) {
    if (!sending) return;
    ev.preventDefault();
    ev.returnValue = "";
  });

  form.addEventListener("htmx:beforeRequest", function (ev) {
    if (!input.files || !input.files.length) {
      // Nothing chosen: said here, without a request the board would refuse (and the
      // browser's console would log as a failed one).
      ev.preventDefault();
      status.textContent = "Choose a file first, or drop one on the box above.";
      return;
    }
    bar.hidden = false;
    bar.value = 0;
    status.textContent = "uploading…";
    sending = true;
  });
  form.addEventListener("htmx:xhr:progress", function (ev) {
    var d = ev.detail || {};
    if (d.lengthComputable && d.total) {
      bar.value = Math.round(100 * d.loaded / d.total);
      status.textContent = "uploading… " + bar.value + "%";
    }
  });
  form.addEventListener("htmx:afterRequest", function (ev) {
    sending = false;
    bar.hidden = true;
    if (ev.detail && ev.detail.successful) status.textContent = "";
  });
  form.addEventListener("htmx:responseError", function (ev) {
    var xhr = ev.detail && ev.detail.xhr;
    var message = "";
    if (xhr && xhr.responseText) {
      // The board answers errors as JSON ({"error": ...}) or as an HTML page; read the text only.
      try {
        message = String(JSON.parse(xhr.responseText).error || "");
      } catch (e) {
        var doc = new DOMParser().parseFromString(xhr.responseText, "text/html");
        var el = doc.querySelector(".error-message");
        message = (el || doc.body).textContent.trim();
      }
    }
    status.textContent = "Upload refused" + (xhr ? " (HTTP " + xhr.status + ")" : "") + (message ? ": " + message : "") +
      (xhr && xhr.status === 401 ? " Sign in at /login with the board's token, then upload again." : "");
    status.classList.add("error-text");
  });
  form.addEventListener("htmx:sendError", function () {
    sending = false;
    status.textContent = "Upload failed: the connection to the board was lost.";
    status.classList.add("error-text");
  });
})();
