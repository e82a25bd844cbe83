
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("lbnorm-data").textContent);
  var columns = data.columns, values = data.values;
  var n = values.length ? values[0].length : 0;
  var modelColumn = columns.findIndex(function (c) { return c.model; });
  var names = values[modelColumn];
  var lowered = names.map(function (s) { return s.toLowerCase(); });
  var table = document.getElementById("board");
  var head = table.tHead.rows[0], body = table.tBodies[0];
  var rows = new Array(n), details = new Array(n), order = [], view = [], shown = 0;
  var sortColumn = -1, sortDirection = 1;
  var PAGE = 200;  // rows drawn at a time: a small DOM keeps sorting and filtering instant
  var filter = document.getElementById("filter"), count = document.getElementById("count");
  var more = document.getElementById("more"), all = document.getElementById("all");
  for (var i = 0; i < n; i++) order.push(i);

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }
  function fixed(value, digits) {
    return value === null || value === undefined ? "" : value.toFixed(digits);
  }
  function cellText(column, value) {
    if (value === null || value === undefined) return "";
    if (column.kind === "num") return value.toFixed(2);
    if (column.kind === "move") return value > 0 ? "+" + value : String(value);
    return String(value);
  }
  function rowFor(i) {
    if (rows[i]) return rows[i];
    var tr = el("tr", data.flagged[i] ? "row marked" : "row");
    tr.tabIndex = 0;
    tr.dataset.i = i;
    tr.setAttribute("aria-expanded", "false");
    for (var c = 0; c < columns.length; c++) {
      var column = columns[c];
      var td = el("td", column.kind === "text" ? "text" : "num", cellText(column, values[c][i]));
      if (column.model) { td.className = "text model"; td.title = names[i]; }
      tr.appendChild(td);
    }
    rows[i] = tr;
    return tr;
  }

  columns.forEach(function (column, c) {
    var th = el("th", column.kind === "text" ? "text" : "num");
    var button = el("button", "", column.label);
    button.type = "button";
    button.title = "sort by " + column.label;
    button.addEventListener("click", function () { sortBy(c); });
    th.setAttribute("aria-sort", "none");
    th.appendChild(button);
    head.appendChild(th);
  });

  // draw the rows of `view` up to `upTo` (default: one more page)
  function draw(upTo) {
    var limit = Math.min(view.length, upTo === undefined ? shown + PAGE : Math.max(upTo, shown));
    var fragment = document.createDocumentFragment();
    for (var k = shown; k < limit; k++) {
      var i = view[k];
      fragment.appendChild(rowFor(i));
      if (details[i]) fragment.appendChild(details[i]);
    }
    body.appendChild(fragment);
    shown = limit;
    var total = n.toLocaleString("en-US"), matching = view.length.toLocaleString("en-US");
    count.textContent = (view.length === n ? total + " variants" : matching + " of " + total + " variants match") +
      (shown < view.length ? ", first " + shown.toLocaleString("en-US") + " shown" : "");
    more.hidden = all.hidden = shown >= view.length;
  }
  function refresh() {
    var query = filter.value.trim().toLowerCase();
    view = query === "" ? order.slice() : order.filter(function (i) { return lowered[i].indexOf(query) >= 0; });
    body.textContent = "";
    shown = 0;
    draw();
  }
  filter.addEventListener("input", refresh);
  more.addEventListener("click", function () { draw(); });
  all.addEventListener("click", function () { draw(view.length); });
  if (window.IntersectionObserver) {  // scrolled to the end of the table: draw more
    new IntersectionObserver(function (entries) {
      if (entries[0].isIntersecting && shown < view.length) draw();
    }, {root: table.parentNode, rootMargin: "300px"}).observe(more);
  }

  function sortBy(c) {
    var column = columns[c];
    sortDirection = sortColumn === c ? -sortDirection : column.first;
    sortColumn = c;
    var keys = values[c], direction = sortDirection, isText = column.kind === "text";
    var lowerKeys = isText ? keys.map(function (s) { return s.toLowerCase(); }) : keys;
    order.sort(function (a, b) {
      var x = lowerKeys[a], y = lowerKeys[b];
      var xMissing = x === null || x === "", yMissing = y === null || y === "";
      if (xMissing || yMissing) return xMissing === yMissing ? a - b : (xMissing ? 1 : -1);
      if (x < y) return -direction;
      if (x > y) return direction;
      return a - b;
    });
    Array.prototype.forEach.call(head.cells, function (th, k) {
      th.setAttribute("aria-sort", k !== c ? "none" : direction > 0 ? "ascending" : "descending");
    });
    refresh();
  }

  function smallTable(headings, lines, textColumns) {
    var t = el("table"), h = t.createTHead().insertRow(), b = t.createTBody();
    headings.forEach(function (text, k) { h.appendChild(el("th", k < textColumns ? "text" : "num", text)); });
    lines.forEach(function (line) {
      var r = b.insertRow();
      line.forEach(function (text, k) { r.appendChild(el("td", k < textColumns ? "text" : "num", text)); });
    });
    return t;
  }
  function detailRow(i) {
    var tr = el("tr", "detail"), td = el("td"), box = el("div", "box");
    td.colSpan = columns.length;
    box.appendChild(el("h3", "", names[i]));
    var metadata = data.facts.map(function (f) { return f.label; });
    var facts = columns.filter(function (c) {
      return !c.model && c.benchmark === undefined && metadata.indexOf(c.label) < 0;
    }).map(function (c) { return c.label + ": " + cellText(c, values[columns.indexOf(c)][i]); })
      .concat(data.facts.map(function (f) { return f.label + ": " + f.values[i]; }));
    box.appendChild(el("p", "facts", facts.join(" \u00b7 ")));
    var benchmarkLines = [];
    columns.forEach(function (c, k) {
      if (c.benchmark === undefined) return;
      var stderr = data.stderr ? data.stderr[c.benchmark][i] : null;
      benchmarkLines.push([c.label, fixed(values[k][i], 2),
        stderr === null ? "" : "\u00b1 " + stderr.toFixed(2), fixed(data.raw[c.benchmark][i], 4)]);
    });
    box.appendChild(smallTable(["benchmark", "score", "stderr", "raw"], benchmarkLines, 1));
    if (data.subtasks) {
      var s = data.subtasks, subtaskLines = [];
      for (var j = 0; j < s.subtask.length; j++) {
        if (s.raw[i][j] === null && s.score[i][j] === null) continue;
        subtaskLines.push([s.benchmark[j], s.subtask[j], fixed(s.score[i][j], 2),
          fixed(s.raw[i][j], 4), fixed(s.bound[j], 4)]);
      }
      box.appendChild(smallTable(["benchmark", "subtask", "score", "raw", "lower bound"], subtaskLines, 2));
    }
    td.appendChild(box);
    tr.appendChild(td);
    return tr;
  }
  function toggle(i, open) {
    var isOpen = !!details[i];
    if (open === undefined) open = !isOpen;
    if (open === isOpen) return;
    if (open) {
      details[i] = detailRow(i);
      rows[i].after(details[i]);
    } else {
      details[i].remove();
      details[i] = null;
    }
    rows[i].setAttribute("aria-expanded", String(open));
  }
  body.addEventListener("click", function (event) {
    var tr = event.target.closest("tr.row");
    if (tr) toggle(Number(tr.dataset.i));
  });
  body.addEventListener("keydown", function (event) {
    var tr = event.target.closest("tr.row");
    if (tr && (event.key === "Enter" || event.key === " ")) {
      event.preventDefault();
      toggle(Number(tr.dataset.i));
    }
  });
  function reveal(i) {
    var at = view.indexOf(i);
    if (at < 0) { filter.value = ""; refresh(); at = view.indexOf(i); }
    if (at >= shown) draw(at + 1);
    toggle(i, true);
    rows[i].scrollIntoView({block: "center"});
    rows[i].focus({preventScroll: true});
  }
  refresh();

  var tip = document.getElementById("tip");
  var rankColumn = columns.findIndex(function (c) { return c.label === "rank"; });
  document.querySelectorAll("svg.scatter").forEach(function (svg) {
    var plot = Number(svg.dataset.plot), points = data.points[plot];
    var benchmark = data.benchmarks[plot];
    var scoreColumn = columns.findIndex(function (c) { return c.benchmark === plot; });
    var circles = svg.querySelectorAll(".pts circle"), highlight = svg.querySelector(".hl");
    var xs = new Float64Array(circles.length), ys = new Float64Array(circles.length);
    for (var k = 0; k < circles.length; k++) {
      circles[k].lbnormPoint = k;
      xs[k] = Number(circles[k].getAttribute("cx")) / 10;
      ys[k] = Number(circles[k].getAttribute("cy")) / 10;
    }
    function pointAt(event) {
      if (event.target.lbnormPoint !== undefined) return event.target.lbnormPoint;
      var matrix = svg.getScreenCTM();
      if (!matrix) return -1;
      var p = svg.createSVGPoint();
      p.x = event.clientX; p.y = event.clientY;
      p = p.matrixTransform(matrix.inverse());
      var best = -1, bestDistance = 36;  // within 6 units
      for (var k = 0; k < xs.length; k++) {
        var dx = xs[k] - p.x, dy = ys[k] - p.y, d = dx * dx + dy * dy;
        if (d <= bestDistance) { best = k; bestDistance = d; }
      }
      return best;
    }
    function show(event) {
      var k = pointAt(event);
      if (k < 0) { hide(); return; }
      var i = points.rows[k];
      tip.textContent = "";
      tip.appendChild(el("b", "", names[i]));
      var rank = rankColumn >= 0 ? values[rankColumn][i] : null;
      var precision = values[columns.findIndex(function (c) { return c.label === "precision"; })][i];
      tip.appendChild(el("span", "", (precision ? precision + " \u00b7 " : "") + (rank === null ? "unranked" : "rank " + rank)));
      tip.appendChild(el("br"));
      tip.appendChild(el("span", "", benchmark + " " + fixed(values[scoreColumn][i], 2) +
        " \u00b7 leave-one-out average " + fixed(points.others[k], 2)));
      tip.hidden = false;
      tip.dataset.row = i;
      var x = Math.min(event.clientX + 14, window.innerWidth - tip.offsetWidth - 8);
      var y = event.clientY + 16 + tip.offsetHeight > window.innerHeight ? event.clientY - tip.offsetHeight - 10 : event.clientY + 16;
      tip.style.left = Math.max(x, 4) + "px";
      tip.style.top = Math.max(y, 4) + "px";
      highlight.setAttribute("cx", xs[k]);
      highlight.setAttribute("cy", ys[k]);
    }
    function hide() {
      tip.hidden = true;
      highlight.setAttribute("cx", -10);
      highlight.setAttribute("cy", -10);
    }
    svg.addEventListener("mousemove", show);
    svg.addEventListener("mouseover", show);
    svg.addEventListener("mouseleave", hide);
    svg.addEventListener("click", function (event) {
      var k = pointAt(event);
      if (k >= 0) { hide(); reveal(points.rows[k]); }
    });
  });
})();
