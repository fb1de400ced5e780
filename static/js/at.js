/* Open the History tab at a message: a page opened at "?at=<message index>" (a search hit,
 * issue 29 item 6) opens the markers whose originals hold that message, outermost first,
 * loads the part of their window it is in, scrolls to it and moves focus there.
 *
 * The markers come from /sessions/<id>/messages/<n>/path/ ({"path": [5, 4]}: the last one's
 * originals hold the message; [] when it is in the live context). A window shows its newest
 * (top level) or oldest (inside a marker) messages and folds the rest into gap rows: the gap
 * holding the message is opened until the message is drawn.
 *
 * A page that brings back a saved place (place.js: Back, reload) is left to it.
 * No inline script (the CSP forbids it).
 */
(function () {
  "use strict";

  var STEP_TIMEOUT = 10000;
  var MAX_GAP_OPENS = 80;

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

  function sessionBase() {
    var match = window.location.pathname.match(/^\/sessions\/[0-9a-fA-F-]{36}\//);
    return match ? match[0] : null;
  }

  function idle() {
    return !document.querySelector(".htmx-request, .htmx-swapping, .htmx-settling");
  }

  function pathTo(seq, base) {
    return fetch(base + "messages/" + seq + "/path/", {
      credentials: "same-origin",
      headers: { "Accept": "application/json" }
    }).then(function (response) {
      return response.ok ? response.json() : null;
    }).then(function (body) {
      return body && Array.isArray(body.path) ? body.path : null;
    }, function () { return null; });
  }

  // The originals panel of marker `number` once it is open and loaded.
  function openOriginals(number) {
    return waitFor(function () { return document.getElementById("compaction-" + number); })
      .then(function (marker) {
        if (!marker) { return null; }
        var button = marker.querySelector("button[aria-controls='c" + number + "-originals']");
        if (button && button.getAttribute("aria-expanded") !== "true") { button.click(); }
        return waitFor(function () {
          var panel = document.getElementById("c" + number + "-originals");
          return panel && !panel.hidden && !panel.querySelector(":scope > .loading") && idle()
            ? panel : null;
        });
      });
  }

  // The window that directly holds `node` (a marker's originals, or the top level).
  function windowOf(node) {
    return node.parentElement ? node.parentElement.closest(".originals-panel, #history-items") : null;
  }

  function messageIn(scope, seq) {
    var found = scope.querySelectorAll(".msg[data-seq='" + seq + "']");
    return Array.prototype.filter.call(found, function (m) { return windowOf(m) === scope; })[0] || null;
  }

  function gapIn(scope, seq) {
    var gaps = scope.querySelectorAll(".gap[data-gap]");
    return Array.prototype.filter.call(gaps, function (gap) {
      var range = gap.getAttribute("data-gap").split("-").map(Number);
      return windowOf(gap) === scope && range[0] <= seq && seq <= range[1];
    })[0] || null;
  }

  // Opens the gap holding message `seq` in `scope` until the message is drawn.
  function reveal(scope, seq, opens) {
    var message = messageIn(scope, seq);
    if (message || opens >= MAX_GAP_OPENS) { return Promise.resolve(message); }
    var gap = gapIn(scope, seq);
    var button = gap ? gap.querySelector("button") : null;
    if (!button) { return Promise.resolve(null); }
    button.click();
    return waitFor(function () { return !gap.isConnected && idle(); }).then(function () {
      return reveal(scope, seq, opens + 1);
    });
  }

  function arrive(target) {
    if (!target.hasAttribute("tabindex")) { target.setAttribute("tabindex", "-1"); }
    target.classList.add("at-target");
    target.scrollIntoView({ block: "center" });
    target.focus({ preventScroll: true });
    document.documentElement.setAttribute("data-at-arrived", target.getAttribute("data-seq"));
  }

  function goToMessage(seq) {
    var base = sessionBase();
    var top = document.getElementById("history-items");
    if (!base || !top) { return Promise.resolve(false); }
    return pathTo(seq, base).then(function (path) {
      if (!path) { return null; }
      var step = Promise.resolve(top);
      path.forEach(function (number) {
        step = step.then(function (scope) { return scope ? openOriginals(number) : null; });
      });
      return step;
    }).then(function (scope) {
      return scope ? reveal(scope, seq, 0) : null;
    }).then(function (target) {
      if (target) { arrive(target); }
      return Boolean(target);
    });
  }

  function start() {
    var at = new URLSearchParams(window.location.search).get("at");
    if (at === null || !/^\d+$/.test(at)) { return; }
    if (window.history.state && window.history.state.ctxPlace) { return; }  // place.js's
    goToMessage(Number(at));
  }

  // After htmx has processed the page (its expanders load through it).
  if (document.readyState === "complete") {
    start();
  } else {
    window.addEventListener("load", start);
  }
})();
