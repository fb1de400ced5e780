/* Keep my place in the History tab: Back, Forward, reload and the round trip through a
 * subagent's page bring back the open markers, messages and tool rows and the scroll.
 *
 * The place lives in the page's history entry (history.state.ctxPlace, beside whatever htmx
 * keeps there), as the sticky path's "#compaction-n" lives in its URL: the ids of the regions
 * open in #history, in document order, whether "Expand all" was on, and the scroll offset.
 * It is written as the reader opens, closes and scrolls, and again when the page is left.
 * A page loaded into an entry that has a place opens those regions again, level by level
 * (a nested marker exists only once the originals around it are loaded), then scrolls back.
 * htmx replaces an entry's state when a tab is chosen (it pushes ?tab=...), so the place is
 * also kept in sessionStorage by URL, and a page reloaded or gone back to without a place
 * in its entry (htmx reloads a page it has no copy of) takes it from there; so does the
 * parent session opened from its subagent's "Subagent of" link (the round trip by links).
 *
 * No inline script (the CSP forbids it); ctxweb.js opens the regions (its click handler).
 */
(function () {
  "use strict";

  var KEY = "ctxPlace";
  var EXPAND_ALL = "data-expanding-all";
  var RESTORE_TIMEOUT = 20000;
  var STORE = KEY + ":";
  var RETURN = KEY + ":return";
  var timer = null;

  function here() {
    return window.location.pathname + window.location.search;
  }

  // Only Back, Forward and reload bring a place back: a page opened afresh starts as drawn.
  function returning() {
    var entries = window.performance && window.performance.getEntriesByType ?
      window.performance.getEntriesByType("navigation") : [];
    var type = entries.length ? entries[0].type : "";
    return type === "reload" || type === "back_forward";
  }

  function stored(path) {
    try {
      return JSON.parse(window.sessionStorage.getItem(STORE + path) || "null");
    } catch (error) {
      return null;
    }
  }

  // Opened from a subagent's link back to this parent (marked when it was clicked): the
  // place kept for this session's History tab, whichever of its URLs it was kept under.
  function backFromSubagent() {
    var path = window.location.pathname;
    var marked = null;
    try {
      marked = window.sessionStorage.getItem(RETURN);
      window.sessionStorage.removeItem(RETURN);
    } catch (error) {
      return null;
    }
    if (marked !== path || window.location.search) { return null; }
    return stored(path) || stored(path + "?tab=history");
  }

  var saved = (window.history.state && window.history.state[KEY]) ||
    (returning() ? stored(here()) : backFromSubagent());
  var restoring = Boolean(saved);
  if (restoring) {
    // deep.js leaves the URL's #compaction-n alone while the place comes back.
    document.documentElement.setAttribute("data-place-restoring", "");
  }

  // The browser's own restoration would scroll before the markers are open again.
  if (restoring && "scrollRestoration" in window.history) {
    window.history.scrollRestoration = "manual";
  }

  function historyRoot() {
    return document.getElementById("history");
  }

  function place() {
    var root = historyRoot();
    if (!root) { return null; }
    var buttons = root.querySelectorAll("button.expander[aria-expanded='true']");
    var open = Array.prototype.map.call(buttons, function (b) {
      return b.getAttribute("aria-controls");
    }).filter(Boolean);
    return {
      open: open,
      all: root.hasAttribute(EXPAND_ALL),
      y: Math.round(window.scrollY),
      path: here()
    };
  }

  function save() {
    window.clearTimeout(timer);
    timer = null;
    if (restoring) { return; }
    var now = place();
    if (!now) { return; }
    var state = Object.assign({}, window.history.state || {});
    state[KEY] = now;
    try {
      window.history.replaceState(state, "");
      window.sessionStorage.setItem(STORE + now.path, JSON.stringify(now));
    } catch (error) {
      // A state too large or a browser refusing it: the place is only a convenience.
    }
  }

  function saveSoon() {
    if (!restoring && timer === null) { timer = window.setTimeout(save, 150); }
  }

  function busy() {
    return document.querySelector(".htmx-request, .htmx-swapping, .htmx-settling") !== null;
  }

  // Resolves once htmx has nothing in flight (checked every 50 ms), or after `timeout` ms.
  function idle(timeout) {
    return new Promise(function (resolve) {
      var waited = 0;
      (function check() {
        if ((!busy() && waited >= 50) || waited >= timeout) { resolve(); return; }
        waited += 50;
        window.setTimeout(check, 50);
      })();
    });
  }

  // Opens every wanted region that is on the page; returns those not there yet.
  function openPresent(root, wanted) {
    return wanted.filter(function (id) {
      var button = root.querySelector(
        "button.expander[aria-controls='" + window.CSS.escape(id) + "']");
      if (!button) { return true; }
      if (button.getAttribute("aria-expanded") !== "true") { button.click(); }
      return false;
    });
  }

  function finish(root, memo) {
    if (memo.all) { root.setAttribute(EXPAND_ALL, ""); }
    window.scrollTo(0, memo.y);
    // Parts drawn when they come into view (what a summary lost) may still arrive.
    return idle(2000).then(function () {
      window.scrollTo(0, memo.y);
      restoring = false;
      document.documentElement.removeAttribute("data-place-restoring");
      save();
    });
  }

  function restore(memo) {
    var root = historyRoot();
    var samePage = memo && typeof memo.path === "string" &&
      memo.path.split("?")[0] === window.location.pathname;
    if (!root || !samePage || !Array.isArray(memo.open)) {
      restoring = false;
      document.documentElement.removeAttribute("data-place-restoring");
      return;
    }
    var started = Date.now();
    var wanted = memo.open.slice();
    (function step() {
      var left = openPresent(root, wanted);
      var progressed = left.length < wanted.length;
      wanted = left;
      if (!wanted.length || (!progressed && !busy()) || Date.now() - started > RESTORE_TIMEOUT) {
        idle(RESTORE_TIMEOUT).then(function () { return finish(root, memo); });
        return;
      }
      idle(RESTORE_TIMEOUT).then(step);
    })();
  }

  function start() {
    if (restoring) { restore(saved); }
  }

  // Left by a link (a subagent's page, another session): keep the place first, before the
  // navigation begins; "pagehide" catches the rest (a typed URL, a closed tab).
  document.addEventListener("click", function (event) {
    var target = event.target instanceof Element ? event.target : null;
    var link = target ? target.closest("a[href]") : null;
    if (link && link.classList.contains("parent-link")) {
      try {
        window.sessionStorage.setItem(RETURN, new URL(link.href).pathname);
      } catch (error) {
        // No storage: the parent opens as drawn.
      }
    }
    if (link) { save(); return; }
    saveSoon();
  }, true);
  window.addEventListener("scroll", saveSoon, { passive: true });
  document.addEventListener("htmx:afterSettle", saveSoon);
  window.addEventListener("pagehide", save);

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
