// kernelwiki: progressive enhancement only. Every page reads fine without this file.
// 1. Search-as-you-type in the header: "/" or Ctrl+K focuses it, arrow keys pick, Enter opens.
// 2. The graph: highlight a page's neighbours on hover/focus, and pages matching a filter.
(function () {
  "use strict";

  function isTyping(el) {
    if (!el) return false;
    var tag = el.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || el.isContentEditable;
  }

  // Copy a server excerpt (escaped text with <mark> around matches) into `target`
  // as text nodes and <mark> elements only: nothing else from it can reach the page.
  function appendExcerpt(target, html) {
    var doc = new DOMParser().parseFromString("<body>" + html + "</body>", "text/html");
    doc.body.childNodes.forEach(function (node) {
      if (node.nodeType === Node.TEXT_NODE) {
        target.appendChild(document.createTextNode(node.textContent));
      } else if (node.nodeName === "MARK") {
        var m = document.createElement("mark");
        m.textContent = node.textContent;
        target.appendChild(m);
      } else {
        target.appendChild(document.createTextNode(node.textContent || ""));
      }
    });
  }

  function resultUrl(r) {
    return "/pages/" + encodeURIComponent(r.id) + (r.section ? "#" + encodeURIComponent(r.section.anchor) : "");
  }

  function setupQuickSearch(form) {
    var input = form.querySelector("input[name=q]");
    var list = form.querySelector("[role=listbox]");
    var status = form.querySelector("[data-qs-status]");
    if (!input || !list) return;
    var items = [];
    var active = -1;
    var seq = 0;
    var timer = null;

    function close() {
      list.hidden = true;
      input.setAttribute("aria-expanded", "false");
      input.removeAttribute("aria-activedescendant");
      active = -1;
    }

    function highlight(index) {
      var options = list.querySelectorAll("[role=option]");
      if (!options.length) return;
      active = (index + options.length) % options.length;
      options.forEach(function (opt, i) {
        opt.setAttribute("aria-selected", i === active ? "true" : "false");
      });
      input.setAttribute("aria-activedescendant", options[active].id);
      options[active].scrollIntoView({ block: "nearest" });
    }

    function show(results, query) {
      list.textContent = "";
      items = results;
      active = -1;
      if (!results.length) {
        var empty = document.createElement("li");
        empty.className = "qs-empty";
        empty.textContent = "No page matches “" + query + "”. Press Enter to search.";
        list.appendChild(empty);
      }
      results.forEach(function (r, i) {
        var li = document.createElement("li");
        li.id = "qs-opt-" + i;
        li.setAttribute("role", "option");
        li.setAttribute("aria-selected", "false");
        li.dataset.href = resultUrl(r);
        var title = document.createElement("span");
        title.className = "qs-title";
        title.textContent = r.title;
        if (r.section) {
          var sect = document.createElement("span");
          sect.className = "qs-sect";
          sect.textContent = " › " + r.section.heading;
          title.appendChild(sect);
        }
        var snip = document.createElement("span");
        snip.className = "qs-snip";
        appendExcerpt(snip, r.snippet || "");
        li.appendChild(title);
        li.appendChild(snip);
        li.addEventListener("mousedown", function (ev) {
          ev.preventDefault();
          window.location.assign(li.dataset.href);
        });
        list.appendChild(li);
      });
      list.hidden = false;
      input.setAttribute("aria-expanded", "true");
      if (status) status.textContent = results.length + " suggestions";
    }

    function query() {
      var q = input.value.trim();
      var mine = ++seq;
      if (!q) { close(); return; }
      fetch("/api/search?limit=8&q=" + encodeURIComponent(q), { headers: { Accept: "application/json" } })
        .then(function (res) { return res.ok ? res.json() : { results: [] }; })
        .then(function (data) { if (mine === seq && input.value.trim() === q) show(data.results || [], q); })
        .catch(function () { /* offline or server gone: the form still submits */ });
    }

    input.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(query, 90);
    });
    input.addEventListener("keydown", function (ev) {
      if (ev.key === "ArrowDown" || ev.key === "ArrowUp") {
        if (list.hidden) { query(); return; }
        ev.preventDefault();
        highlight(active + (ev.key === "ArrowDown" ? 1 : -1));
      } else if (ev.key === "Enter" && !list.hidden && active >= 0) {
        var opt = list.querySelectorAll("[role=option]")[active];
        if (opt) { ev.preventDefault(); window.location.assign(opt.dataset.href); }
      } else if (ev.key === "Escape") {
        if (!list.hidden) { ev.preventDefault(); close(); } else { input.blur(); }
      }
    });
    input.addEventListener("blur", function () { setTimeout(close, 150); });

    document.addEventListener("keydown", function (ev) {
      var ctrlK = (ev.ctrlKey || ev.metaKey) && (ev.key === "k" || ev.key === "K");
      if (ctrlK || (ev.key === "/" && !isTyping(document.activeElement) && !ev.ctrlKey && !ev.metaKey && !ev.altKey)) {
        ev.preventDefault();
        input.focus();
        input.select();
      }
    });
  }

  function setupGraph(svg) {
    var nodes = Array.prototype.slice.call(svg.querySelectorAll(".node"));
    var edges = Array.prototype.slice.call(svg.querySelectorAll(".edge"));
    var byId = {};
    nodes.forEach(function (n) { byId[n.dataset.id] = n; });

    function clear() {
      svg.classList.remove("has-focus");
      nodes.forEach(function (n) { n.classList.remove("near", "hit"); });
      edges.forEach(function (e) { e.classList.remove("near"); });
    }

    function focusNode(id) {
      clear();
      svg.classList.add("has-focus");
      byId[id].classList.add("hit");
      edges.forEach(function (e) {
        if (e.dataset.a === id || e.dataset.b === id) {
          e.classList.add("near");
          var other = e.dataset.a === id ? e.dataset.b : e.dataset.a;
          if (byId[other]) byId[other].classList.add("near");
        }
      });
    }

    nodes.forEach(function (n) {
      n.addEventListener("mouseenter", function () { focusNode(n.dataset.id); });
      n.addEventListener("focus", function () { focusNode(n.dataset.id); });
      n.addEventListener("mouseleave", clear);
      n.addEventListener("blur", clear);
    });

    var form = document.querySelector("[data-graph-filter]");
    if (form) {
      form.hidden = false;
      form.addEventListener("submit", function (ev) { ev.preventDefault(); });
      var find = form.querySelector("input");
      find.addEventListener("input", function () {
        var q = find.value.trim().toLowerCase();
        clear();
        if (!q) return;
        svg.classList.add("has-focus");
        nodes.forEach(function (n) {
          var label = (n.dataset.id + " " + (n.getAttribute("aria-label") || "")).toLowerCase();
          if (label.indexOf(q) !== -1) n.classList.add("hit");
        });
      });
    }
  }

  document.addEventListener("DOMContentLoaded", function () {
    var form = document.querySelector("[data-quick-search]");
    if (form) setupQuickSearch(form);
    var svg = document.querySelector("svg[data-graph]");
    if (svg) setupGraph(svg);
  });
})();
