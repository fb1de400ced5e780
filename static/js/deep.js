/* ctxweb deep navigation in the History tab: go to a nested compaction, a sticky path of
 * the markers being read, a collapse button at the bottom of an open marker, and a
 * summary's raw text one click away.
 *
 * No inline script (the CSP forbids it): everything hangs off delegated listeners.
 *
 * Going to compaction #n (a timeline drop or any "#compaction-n" link): the page asks
 * /sessions/<id>/compactions/<n>/path/ which markers enclose it ({"path": [5, 4, 3]}),
 * switches to the History tab if needed, then opens the originals of each enclosing
 * marker in turn (htmx loads them: every marker of a level is always drawn in its window,
 * never folded into a gap), scrolls to #n and moves focus there.
 */
(function () {
  "use strict";

  var HASH = /#compaction-(\d+)$/;
  var STEP_TIMEOUT = 10000;

  function sessionBase() {
    var match = window.location.pathname.match(/^\/sessions\/[0-9a-fA-F-]{36}\//);
    return match ? match[0] : null;
  }

  // Resolves with what `find` returns once it is truthy (checked every 50 ms), or null.
  function waitFor(find, timeout) {
    return new Promise(function (resolve) {
      var waited = 0;
      (function check() {
        var found = find();
        if (found || waited >= (timeout || STEP_TIMEOUT)) { resolve(found || null); return; }
        waited += 50;
        window.setTimeout(check, 50);
      })();
    });
  }

  function marker(number) {
    return document.getElementById("compaction-" + number);
  }

  function ensureHistoryTab() {
    if (document.getElementById("history")) { return Promise.resolve(true); }
    var tab = document.getElementById("tab-history");
    if (!tab) { return Promise.resolve(false); }
    tab.click();
    return waitFor(function () { return document.getElementById("history"); }).then(Boolean);
  }

  function pathTo(number, base) {
    return fetch(base + "compactions/" + number + "/path/", {
      credentials: "same-origin",
      headers: { "Accept": "application/json" }
    }).then(function (response) {
      return response.ok ? response.json() : { path: [number] };
    }).then(function (body) {
      return Array.isArray(body.path) && body.path.length ? body.path : [number];
    }, function () { return [number]; });
  }

  function openOriginals(number) {
    var button = document.querySelector("button[aria-controls='c" + number + "-originals']");
    if (button && button.getAttribute("aria-expanded") !== "true") { button.click(); }
  }

  function arrive(target) {
    if (!target.hasAttribute("tabindex")) { target.setAttribute("tabindex", "-1"); }
    target.classList.add("deep-target");
    target.scrollIntoView({ block: "start" });
    target.focus({ preventScroll: true });
    window.setTimeout(function () { target.classList.remove("deep-target"); }, 2500);
  }

  // Opens the markers down to compaction `number`, loading what is missing, and goes there.
  function goTo(number) {
    var base = sessionBase();
    if (!base) { return Promise.resolve(false); }
    return ensureHistoryTab().then(function (ok) {
      return ok ? pathTo(number, base) : null;
    }).then(function (path) {
      if (!path) { return false; }
      var step = Promise.resolve(true);
      path.forEach(function (n, index) {
        step = step.then(function (ok) {
          if (!ok) { return false; }
          return waitFor(function () { return marker(n); }).then(function (found) {
            if (found && index < path.length - 1) { openOriginals(n); }
            return Boolean(found);
          });
        });
      });
      return step.then(function (ok) {
        var target = marker(number);
        if (ok && target) {
          arrive(target);
          recent = { number: number, until: Date.now() + 15000 };
          if (window.history && window.history.replaceState) {
            window.history.replaceState(window.history.state, "", "#compaction-" + number);
          }
        }
        return ok;
      });
    });
  }

  // The live poll draws the whole history again after a compaction (live.js). A marker the
  // reader has just gone to (a job's "Compaction #n" link lands as its compaction arrives)
  // is gone to again once the new history is in, instead of being scrolled away; and again
  // when the open marker around it is loaded afresh (live.js keeps it open meanwhile).
  var recent = null;
  document.addEventListener("htmx:load", function (event) {
    if (!recent || Date.now() > recent.until) { return; }
    var target = event.target instanceof Element ? event.target : null;
    var id = "compaction-" + recent.number;
    if (target && (target.id === "history" || target.id === id ||
        target.querySelector("#" + id))) {
      goTo(recent.number);
    }
  });

  function numberOfLink(link) {
    var href = link.getAttribute("href") || link.getAttribute("xlink:href") || "";
    // Only links to this page: "#compaction-n" or "?tab=history#compaction-n".
    if (!(href.charAt(0) === "#" || href.indexOf("?tab=history#") === 0)) { return null; }
    var match = href.match(HASH);
    return match ? Number(match[1]) : null;
  }

  function toggleRaw(button) {
    var ids = (button.getAttribute("aria-controls") || "").split(/\s+/);
    var formatted = document.getElementById(ids[0]);
    var raw = document.getElementById(ids[1]);
    if (!formatted || !raw) { return; }
    var showRaw = raw.hidden;
    raw.hidden = !showRaw;
    formatted.hidden = showRaw;
    button.setAttribute("aria-pressed", showRaw ? "true" : "false");
    button.textContent = showRaw ? "Formatted" : "Raw text";
  }

  function collapseMarker(number) {
    var box = marker(number);
    if (!box) { return; }
    var row = box.querySelector(".marker-row");
    var open = row ? row.querySelectorAll("button.expander[aria-expanded='true']") : [];
    Array.prototype.forEach.call(open, function (button) { button.click(); });
    var first = row ? row.querySelector("button.expander") : null;
    box.scrollIntoView({ block: "nearest" });
    if (first) { first.focus({ preventScroll: true }); }
  }

  document.addEventListener("click", function (event) {
    var target = event.target instanceof Element ? event.target : null;
    if (!target || event.defaultPrevented || event.button !== 0 ||
        event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) { return; }
    var link = target.closest("a");
    var number = link ? numberOfLink(link) : null;
    if (number !== null) {
      event.preventDefault();
      goTo(number);
      return;
    }
    var raw = target.closest("[data-raw-toggle]");
    if (raw) { toggleRaw(raw); return; }
    var collapse = target.closest("[data-collapse-marker]");
    if (collapse) { collapseMarker(collapse.getAttribute("data-collapse-marker")); }
  });

  // The sticky path: the open markers around the line being read, outermost first.
  var scheduled = false;

  function openMarkerAt(y) {
    var found = null;
    var open = document.querySelectorAll(".marker > .originals-panel:not([hidden])");
    Array.prototype.forEach.call(open, function (panel) {
      var rect = panel.getBoundingClientRect();
      if (rect.top <= y && rect.bottom >= y) {
        var box = panel.parentElement;
        if (!found || found.contains(box)) { found = box; }
      }
    });
    return found;
  }

  function pathBar(history) {
    var bar = history.querySelector(":scope > .deep-path");
    if (!bar) {
      bar = document.createElement("nav");
      bar.className = "deep-path";
      bar.setAttribute("aria-label", "Open compactions");
      bar.hidden = true;
      history.insertBefore(bar, history.firstChild);
    }
    return bar;
  }

  function updatePath() {
    scheduled = false;
    var history = document.getElementById("history");
    if (!history) { return; }
    var bar = pathBar(history);
    // The line read is the first below the sticky top bar and this path (its CSS `top`).
    var stuck = parseFloat(window.getComputedStyle(bar).top) || 0;
    var top = Math.max(history.getBoundingClientRect().top, stuck) + bar.offsetHeight + 4;
    var inner = openMarkerAt(top);
    var chain = [];
    for (var box = inner; box; box = box.parentElement ? box.parentElement.closest(".marker") : null) {
      chain.unshift(box.getAttribute("data-compaction"));
    }
    var text = chain.join(",");
    if (bar.getAttribute("data-path") === text) { return; }
    bar.setAttribute("data-path", text);
    bar.replaceChildren();
    chain.forEach(function (n, index) {
      if (index) {
        var sep = document.createElement("span");
        sep.setAttribute("aria-hidden", "true");
        sep.textContent = "›";
        bar.appendChild(sep);
      }
      var link = document.createElement("a");
      link.href = "#compaction-" + n;
      link.textContent = "#" + n;
      bar.appendChild(link);
    });
    bar.hidden = chain.length === 0;
  }

  // Drawn at the next frame; a timer stands in when no frame comes soon (a browser may hold
  // frames back under load), so a scroll is never left without its path.
  var fallback = null;

  function drawPath() {
    window.clearTimeout(fallback);
    if (scheduled) { updatePath(); }
  }

  function schedule() {
    if (!scheduled) {
      scheduled = true;
      window.requestAnimationFrame(drawPath);
      fallback = window.setTimeout(drawPath, 250);
    }
  }

  document.addEventListener("scroll", schedule, true);
  window.addEventListener("resize", schedule);
  document.addEventListener("htmx:afterSettle", schedule);
  document.addEventListener("click", function () { window.setTimeout(schedule, 0); });

  // A page opened at "#compaction-n" (a link from another tab or page) goes there too.
  function fromHash() {
    // A page brought back with its place (place.js: Back, reload) reopens that place instead.
    if (document.documentElement.hasAttribute("data-place-restoring")) { return; }
    var match = window.location.hash.match(HASH);
    if (match) { goTo(Number(match[1])); }
  }
  // At DOMContentLoaded, after every deferred script (place.js among them) has run.
  if (document.readyState === "complete") {
    fromHash();
  } else {
    document.addEventListener("DOMContentLoaded", fromHash);
  }
  window.addEventListener("hashchange", fromHash);
})();
