/* Live pages: the list and a session page poll for changes (views/changes.py).
 *
 * Pollers are hidden elements with data-live and hx-trigger="every Ns, live-poll". This file
 * only steers them (no inline script, no eval, so it works under the page's CSP):
 * - no poll while the browser tab is hidden; one at once when it is shown again;
 * - a session page's poll says which tab is open (data-live-tabs), so the server answers
 *   with new history rows only when the history is on screen;
 * - rows already on the page are never appended twice;
 * - when the history is drawn again (the poll's answer after a compaction, or the open tab
 *   reloaded after an action), the markers and rows that were open stay open: in the same
 *   step as the swap, each open region keeps what it showed (a lazy one until its fresh copy
 *   arrives), so nothing folds or flashes "Loading…" in between.
 */
(function () {
  "use strict";

  var kept = null;

  function isLive(elt) {
    return elt instanceof Element && elt.hasAttribute("data-live");
  }

  document.addEventListener("htmx:beforeRequest", function (event) {
    if (isLive(event.target) && document.visibilityState !== "visible") {
      event.preventDefault();
    }
  });

  // Every LIMITS_EVERY-th poll of a session page (and the first) also carries the limits it
  // drew (data-limits): a threshold changed in the admin does not move the session's stamp,
  // so the server compares them and answers with a fresh overview when they differ. The
  // other polls stay one query each.
  var LIMITS_EVERY = 5;
  var polls = 0;

  document.addEventListener("htmx:configRequest", function (event) {
    var elt = event.target;
    if (!(isLive(elt) && elt.hasAttribute("data-live-tabs"))) { return; }
    var tab = document.querySelector("#session-tabs [role=tab][aria-selected=true]");
    event.detail.parameters.tab = tab ? tab.getAttribute("data-tab") : "history";
    if (polls++ % LIMITS_EVERY === 0 && elt.hasAttribute("data-limits")) {
      event.detail.parameters.limits = elt.getAttribute("data-limits");
    }
  });

  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState !== "visible" || !window.htmx) { return; }
    document.querySelectorAll("[data-live]").forEach(function (elt) {
      window.htmx.trigger(elt, "live-poll");
    });
  });

  // What is open in `history`, about to be replaced: each open expander's region id and,
  // for a lazy one (hx-get), the nodes it shows.
  function keepOpen(history) {
    var open = Array.prototype.slice.call(
      history.querySelectorAll("button.expander[aria-expanded=true]"));
    return {
      history: history,
      open: open.map(function (button) {
        var id = button.getAttribute("aria-controls");
        var region = id ? document.getElementById(id) : null;
        var nodes = region && button.hasAttribute("hx-get") ?
          Array.prototype.slice.call(region.childNodes) : null;
        return { id: id, nodes: nodes };
      })
    };
  }

  // Right after the swap (same task: nothing is drawn in between), open again in the new
  // history what was open. A lazy region shows its old nodes while it loads afresh.
  function reopen() {
    var history = document.getElementById("history");
    if (!kept || !history || history === kept.history) { return; }
    var open = kept.open;
    kept = null;
    open.forEach(function (item) {
      if (!item.id) { return; }
      var button = history.querySelector(
        "button.expander[aria-expanded=false][aria-controls='" + item.id + "']");
      var region = document.getElementById(item.id);
      if (!button || !region) { return; }
      if (item.nodes) { region.replaceChildren.apply(region, item.nodes); }
      button.click();  // ctxweb.js opens it (and loads a lazy one)
    });
  }

  document.addEventListener("htmx:oobBeforeSwap", function (event) {
    var detail = event.detail || {};
    var target = detail.target;
    if (!(target instanceof Element)) { return; }
    if (target.id === "history-items" && detail.fragment) {
      Array.prototype.slice.call(detail.fragment.children).forEach(function (row) {
        if (row.id && document.getElementById(row.id)) { row.remove(); }
      });
    }
    if (target.id === "history") { kept = keepOpen(target); }
  });

  // The open tab reloaded in place (ctxweb.js, after an action) while it shows the history.
  document.addEventListener("htmx:beforeSwap", function (event) {
    var detail = event.detail || {};
    var target = detail.target;
    if (!(target instanceof Element) || target.id !== "tab-panel" || !detail.shouldSwap) {
      return;
    }
    var history = target.querySelector("#history");
    if (history) { kept = keepOpen(history); }
  });

  document.addEventListener("htmx:oobAfterSwap", reopen);
  document.addEventListener("htmx:afterSwap", reopen);
})();
