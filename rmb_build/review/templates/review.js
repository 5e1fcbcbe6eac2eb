// The review page's keys: each saves the label (a form POST) and moves on. Not while typing a note.
(function () {
  "use strict";
  var sent = false;
  document.addEventListener("DOMContentLoaded", function () {
    var fill = document.querySelector(".fill");
    if (fill) { fill.style.width = fill.getAttribute("data-percent") + "%"; }
    document.querySelectorAll("form").forEach(function (form) {
      form.addEventListener("submit", function (event) {
        if (sent) { event.preventDefault(); return; }
        sent = true;
      });
    });
  });
  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || sent) { return; }
    var target = event.target;
    if (target && (target.tagName === "TEXTAREA" || (target.tagName === "INPUT" && target.type === "text"))) { return; }
    var button = document.querySelector('button[data-key="' + CSS.escape(event.key) + '"]');
    if (button) {
      event.preventDefault();
      button.click();
    }
  });
})();
