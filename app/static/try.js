// kernelwiki try editor (app/templates/try.html): progressive enhancement of a form that works without it.
// - Tab / Shift+Tab indent and unindent in the source; Escape lets the next Tab leave the editor.
// - Run posts JSON to /api/try with the token as a Bearer header and fills the result panel from the
//   Server-Sent Events of the answer (queued, compiling, running, done).
// - "Open in Compiler Explorer" follows the edits (a godbolt.org client-state link; nothing is sent from here).
(function () {
  "use strict";
  var form = document.querySelector("[data-try-form]");
  if (!form) return;
  var source = form.querySelector("[data-try-source]");
  var tokenInput = form.querySelector("[data-try-token]");
  var panel = document.querySelector("[data-try-result]");
  var TOKEN_KEY = "kernelwiki-try-token";
  var INDENT = "    ";

  try {
    var kept = window.sessionStorage.getItem(TOKEN_KEY);
    if (kept && tokenInput && !tokenInput.value) tokenInput.value = kept;
  } catch (e) { /* storage refused: the field still works */ }

  // --- the editor's keys -------------------------------------------------------------------------
  var leaving = false;
  source.addEventListener("keydown", function (ev) {
    if (ev.key === "Escape") { leaving = true; return; }
    if (ev.key !== "Tab" || ev.ctrlKey || ev.altKey || ev.metaKey) { leaving = false; return; }
    if (leaving) { leaving = false; return; }  // let the browser move the focus
    ev.preventDefault();
    var start = source.selectionStart, end = source.selectionEnd, text = source.value;
    var lineStart = text.lastIndexOf("\n", start - 1) + 1;
    if (!ev.shiftKey && start === end) {
      source.setRangeText(INDENT, start, end, "end");
    } else {
      var block = text.slice(lineStart, end);
      var lines = block.split("\n");
      var changed = lines.map(function (l) {
        if (!ev.shiftKey) return INDENT + l;
        return l.replace(/^( {1,4}|\t)/, "");
      }).join("\n");
      source.setRangeText(changed, lineStart, end, "select");
    }
    source.dispatchEvent(new Event("input"));
  });

  // --- Compiler Explorer link --------------------------------------------------------------------
  var ce = form.querySelector("[data-try-ce]");
  function asciiJson(value) {
    return JSON.stringify(value).replace(/[\u007f-\uffff]/g, function (c) {
      return "\\u" + ("0000" + c.charCodeAt(0).toString(16)).slice(-4);
    });
  }
  function values() {
    var targets = [];
    form.querySelectorAll("[data-try-target]").forEach(function (box) { if (box.checked) targets.push(box.value); });
    return {
      source: source.value,
      lang: form.querySelector("[data-try-lang]").value,
      attributes: form.querySelector("[data-try-attributes]").value,
      targets: targets,
      snippet_id: form.querySelector("input[name=snippet_id]").value || null
    };
  }
  function updateCe() {
    if (!ce) return;
    var v = values();
    var lang = { cuda: "cuda", cpp: "c++", ptx: "ptx", python: "python" }[v.lang] || "cuda";
    var compiler = { cuda: "nvcc130", "c++": "g141", ptx: "ptxas130", python: "python313" }[lang];
    var flags = [];
    if (v.targets.length && v.targets[0].indexOf("sm_") === 0) flags.push("-arch=" + v.targets[0]);
    var m = /(?:^|\s)flags="([^"]*)"/.exec(v.attributes);
    if (m) flags = flags.concat(m[1].split(/\s+/).filter(Boolean));
    var state = { sessions: [{ id: 1, language: lang, source: v.source, compilers: [{ id: compiler, options: flags.join(" ") }] }] };
    ce.href = "https://godbolt.org/clientstate/" + btoa(asciiJson(state)).replace(/\//g, "_").replace(/\+/g, "-");
  }
  form.addEventListener("input", updateCe);
  form.addEventListener("change", updateCe);

  // --- running -----------------------------------------------------------------------------------
  function el(sel) { return panel.querySelector(sel); }
  function setText(sel, text) { el(sel).textContent = text; }

  function show(run) {
    var result = run.result || {};
    var records = result.records || [];
    var logs = [], outputs = [], sass = [];
    var box = el("[data-try-records]");
    box.textContent = "";
    var list = document.createElement("ul");
    records.forEach(function (r) {
      var li = document.createElement("li");
      li.textContent = r.target + " " + r.step + ": " + r.status + (r.message ? " (" + r.message + ")" : "") +
        (r.gpu_name ? " on " + r.gpu_name : "");
      li.className = "st-" + r.status;
      list.appendChild(li);
      if (r.step === "compile") logs.push("# " + r.target + "\n" + (r.command || "") + "\n" + (r.output || "(no compiler output)"));
      if (r.step === "run" || r.step === "ncu") outputs.push("# " + r.target + " " + r.step + "\n" + (r.output || r.message || ""));
    });
    box.appendChild(list);
    Object.keys(result.sass || {}).forEach(function (t) { sass.push("# " + t + "\n" + result.sass[t]); });
    setText("[data-try-log]", logs.join("\n\n") || "(no build)");
    setText("[data-try-sass]", sass.join("\n\n") || "(no SASS kept)");
    setText("[data-try-output]", outputs.join("\n\n") || "(nothing ran)");
    var share = el("[data-try-share]");
    share.href = run.url;
    share.textContent = "Share link: " + location.origin + run.url;
    var status = result.status || run.status || run.state;
    var note = result.compile_only ? " Compile-only: " + result.compile_only + "." : "";
    if (result.fault) note += " Could not run: " + result.fault + ".";
    setText("[data-try-status]", "Done: " + status + "." + note);
  }

  function addEvent(name, data) {
    var li = document.createElement("li");
    li.textContent = name + (data && data.target ? " " + data.target : "") + (data && data.cached ? " (stored result)" : "");
    el("[data-try-events]").appendChild(li);
    if (name !== "done") setText("[data-try-status]", name.charAt(0).toUpperCase() + name.slice(1) + "…");
  }

  function problemText(body, status) {
    var detail = body && body.error ? body.error.detail : body;
    if (Array.isArray(detail)) {
      return detail.map(function (d) { return (d.loc ? d.loc[d.loc.length - 1] + ": " : "") + d.msg; }).join("; ");
    }
    return "HTTP " + status + ": " + (typeof detail === "string" ? detail : JSON.stringify(detail));
  }

  async function readEvents(response) {
    var reader = response.body.getReader();
    var decoder = new TextDecoder();
    var buffer = "";
    for (;;) {
      var chunk = await reader.read();
      if (chunk.done) break;
      buffer += decoder.decode(chunk.value, { stream: true });
      var cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        var block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        var name = "message", data = "";
        block.split("\n").forEach(function (line) {
          if (line.indexOf("event: ") === 0) name = line.slice(7);
          else if (line.indexOf("data: ") === 0) data += line.slice(6);
        });
        if (!data) continue;
        var parsed = JSON.parse(data);
        addEvent(name, parsed);
        if (name === "done") show(parsed.run);
        if (name === "error") setText("[data-try-status]", "Error: " + parsed.detail);
      }
    }
  }

  form.addEventListener("submit", async function (ev) {
    ev.preventDefault();
    var token = tokenInput ? tokenInput.value.trim() : "";
    try { if (token) window.sessionStorage.setItem(TOKEN_KEY, token); } catch (e) { /* not kept */ }
    panel.hidden = false;
    el("[data-try-events]").textContent = "";
    ["[data-try-log]", "[data-try-sass]", "[data-try-output]"].forEach(function (s) { setText(s, ""); });
    el("[data-try-records]").textContent = "";
    setText("[data-try-status]", "Sending…");
    var headers = { "Content-Type": "application/json", Accept: "text/event-stream" };
    if (token) headers.Authorization = "Bearer " + token;
    var button = form.querySelector("[data-try-run]");
    button.disabled = true;
    try {
      var response = await fetch("/api/try", { method: "POST", headers: headers, body: JSON.stringify(values()) });
      if (!response.ok) {
        var body = null;
        try { body = await response.json(); } catch (e) { /* not JSON */ }
        var wait = response.headers.get("Retry-After");
        setText("[data-try-status]", "Not run: " + problemText(body, response.status) + (wait ? " (Retry-After " + wait + " s)" : ""));
        return;
      }
      await readEvents(response);
    } catch (e) {
      setText("[data-try-status]", "Error: " + e);
    } finally {
      button.disabled = false;
      el("#h-try-result").focus();
    }
  });
})();
