(function () {
  "use strict";
  // One table per release (usually one): each sorts on its own, the kind filter applies to all.
  var tables = Array.prototype.slice.call(document.querySelectorAll("table.board"));
  tables.forEach(sortable);

  function sortable(table) {
    var tbody = table.tBodies[0];
    var headers = Array.prototype.slice.call(table.querySelectorAll("th[data-sort]"));
    var current = null, direction = 0;

    function key(row, th) {
      var raw = row.cells[th.cellIndex].getAttribute("data-value");
      if (th.getAttribute("data-sort") === "num") {
        return raw === null || raw === "" ? null : parseFloat(raw);
      }
      return (raw || "").toLowerCase();
    }

    function sortBy(th) {
      // Numbers start highest first, text A to Z; a second click on the same header reverses.
      direction = th === current ? -direction : (th.getAttribute("data-sort") === "num" ? -1 : 1);
      current = th;
      var rows = Array.prototype.slice.call(tbody.rows);
      rows.forEach(function (row, i) { row._order = i; });
      rows.sort(function (a, b) {
        var ka = key(a, th), kb = key(b, th);
        if (ka === null && kb === null) { return a._order - b._order; }
        if (ka === null) { return 1; }   // missing values stay at the bottom either way
        if (kb === null) { return -1; }
        if (ka < kb) { return -direction; }
        if (ka > kb) { return direction; }
        return a._order - b._order;
      });
      rows.forEach(function (row) { tbody.appendChild(row); });
      headers.forEach(function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", direction > 0 ? "ascending" : "descending");
    }

    headers.forEach(function (th) {
      th.tabIndex = 0;
      th.addEventListener("click", function () { sortBy(th); });
      th.addEventListener("keydown", function (ev) {
        if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); sortBy(th); }
      });
    });
  }

  var filter = document.getElementById("kind-filter");
  var shown = document.getElementById("shown");
  filter.addEventListener("change", function () {
    var kind = filter.value, count = 0, total = 0;
    tables.forEach(function (table) {
      Array.prototype.forEach.call(table.tBodies[0].rows, function (row) {
        var visible = !kind || row.getAttribute("data-kind") === kind;
        row.hidden = !visible;
        count += visible ? 1 : 0;
        total += 1;
      });
    });
    shown.textContent = count + " of " + total + " shown";
    // Separability over the RMs shown: recount the pairs whose two RMs are both visible.
    Array.prototype.forEach.call(document.querySelectorAll("p.separability[data-pairs]"), function (p) {
      var table = document.getElementById(p.getAttribute("data-table")), visible = {};
      Array.prototype.forEach.call(table.tBodies[0].rows, function (row) {
        if (!row.hidden) { visible[row.getAttribute("data-slug")] = true; }
      });
      var pairs = JSON.parse(p.getAttribute("data-pairs")).filter(function (d) { return visible[d[0]] && visible[d[1]]; });
      var sep = pairs.filter(function (d) { return d[2]; }).length;
      p.querySelector(".sep-count").textContent = sep + " of the " + pairs.length;
      p.querySelector(".sep-share").textContent = pairs.length ? (100 * sep / pairs.length).toFixed(1) + "%" : "no pair";
    });
  });
})();
