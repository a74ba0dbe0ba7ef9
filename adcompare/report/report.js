// The table of every cell: drawn from the JSON block, sorted and filtered here; cells are set with textContent only.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("cells-data").textContent);
  var cols = data.columns, C = cols.length, N = data.rows, LIMIT = 500, digit = {};
  for (var a = 0; a < data.alphabet.length; a++) digit[data.alphabet.charAt(a)] = a;
  var SEL = cols.findIndex(function (c) { return c.name === "selector"; });
  var LONG = { algorithm: 1, message: 1 };  // truncated in the table, whole in the tooltip and the CSV

  function raw(r, c) {
    var col = cols[c], v;
    if (col.values) v = col.values[r];
    else {
      var k = 0;
      for (var j = 0; j < col.width; j++) k = k * data.alphabet.length + digit[col.codes.charAt(r * col.width + j)];
      v = col.dict[k];
    }
    if (c === SEL && v === "") {
      v = data.selector;
      data.fields.forEach(function (f, i) { v = v.split("\u0000" + f + "\u0000").join(raw(r, i)); });
    }
    return v;
  }
  var rows = [];
  for (var r = 0; r < N; r++) {
    var row = [];
    for (var c = 0; c < C; c++) row.push(raw(r, c));
    row.text = row.join(" ").toLowerCase();
    rows.push(row);
  }

  // Same bytes as Python's csv.writer (QUOTE_MINIMAL, "\n"), so the download equals results.csv.
  function quote(v) { return /[",\r\n]/.test(v) ? '"' + v.replace(/"/g, '""') + '"' : v; }
  var csv = [cols.map(function (c) { return quote(c.name); }).join(",")]
    .concat(rows.map(function (row) { return row.map(quote).join(","); })).join("\n") + "\n";
  document.getElementById("cells-csv").href = "data:text/csv;charset=utf-8," + encodeURIComponent(csv);

  function seconds(s) {
    var v = parseFloat(s);
    if (isNaN(v)) return s;
    var units = [["s", 1], ["ms", 1e-3], ["\u00b5s", 1e-6], ["ns", 1e-9]];
    for (var i = 0; i < units.length; i++) {
      if (Math.abs(v) >= units[i][1] || i === units.length - 1) return (v / units[i][1]).toPrecision(3) + " " + units[i][0];
    }
  }
  function show(kind, v) {
    if (v === "") return "";
    if (kind === "seconds") return seconds(v);
    if (kind === "ratio") return "\u00d7" + parseFloat(v).toPrecision(3);
    if (kind === "error") return parseFloat(v).toPrecision(2);
    return v;
  }

  var shown = cols.map(function (c, i) { return i; }).filter(function (i) { return cols[i].shown; });
  var table = document.getElementById("cells-table");
  var headRow = document.createElement("tr");
  shown.forEach(function (c) {
    var th = document.createElement("th");
    th.textContent = cols[c].name;
    th.title = "sort by " + cols[c].name;
    th.addEventListener("click", function () { sortBy(c, th); });
    headRow.appendChild(th);
  });
  table.tHead.appendChild(headRow);

  var order = rows.slice(), sortCol = -1, sortDir = 1;
  function sortBy(c, th) {
    sortDir = sortCol === c ? -sortDir : 1;
    sortCol = c;
    var numeric = cols[c].kind !== "text";
    order.sort(function (a, b) {
      var x = a[c], y = b[c];
      if (x === "" || y === "") return (x === "") - (y === "");  // blanks last either way
      if (numeric) return sortDir * (parseFloat(x) - parseFloat(y));
      return sortDir * x.localeCompare(y, undefined, { numeric: true });
    });
    headRow.querySelectorAll("th").forEach(function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", sortDir > 0 ? "ascending" : "descending");
    draw();
  }

  var filter = document.getElementById("cells-filter"), count = document.getElementById("cells-count");
  function draw() {
    var terms = filter.value.toLowerCase().split(/\s+/).filter(Boolean).map(function (t) {
      var eq = t.indexOf("=");  // column=value matches that column exactly
      if (eq > 0) {
        var c = cols.findIndex(function (col) { return col.name === t.slice(0, eq); });
        if (c >= 0) return function (row) { return row[c].toLowerCase() === t.slice(eq + 1); };
      }
      return function (row) { return row.text.indexOf(t) >= 0; };
    });
    var body = document.createElement("tbody"), matched = 0;
    order.forEach(function (row) {
      if (!terms.every(function (f) { return f(row); })) return;
      if (++matched > LIMIT) return;
      var tr = document.createElement("tr");
      shown.forEach(function (c) {
        var td = document.createElement("td"), name = cols[c].name, v = row[c];
        if (name === "status") {
          var chip = document.createElement("span");
          chip.className = "chip s-" + v;
          chip.textContent = v;
          td.appendChild(chip);
        } else if (name === "support" && v === "emulated") {
          var tag = document.createElement("span");
          tag.className = "tag emulated";
          tag.textContent = v;
          td.appendChild(tag);
        } else {
          td.textContent = show(cols[c].kind, v);
        }
        if (cols[c].kind !== "text") td.className = "num";
        if (LONG[name]) { td.className = "long"; td.title = v; }
        if (name === "selector") td.className = "selector";
        if (cols[c].kind === "seconds" && v !== "") td.title = v + " s";
        tr.appendChild(td);
      });
      body.appendChild(tr);
    });
    table.replaceChild(body, table.tBodies[0]);
    count.textContent = matched > LIMIT ? "showing the first " + LIMIT + " of " + matched + " matching cells (" + N + " in all); filter to narrow"
      : matched + " of " + N + " cells";
  }
  filter.addEventListener("input", draw);
  draw();

  // The overview heatmap's tiles link to "#filter=<column=value ...>": show the table filtered to those cells.
  function follow() {
    if (location.hash.indexOf("#filter=") !== 0) return;
    filter.value = decodeURIComponent(location.hash.slice(8));
    draw();
    Array.prototype.forEach.call(table.tBodies[0].rows, function (tr) { tr.className = "linked"; });
    document.getElementById("cells").scrollIntoView();
  }
  window.addEventListener("hashchange", follow);
  follow();
})();
