/* Live pages: the list and a session page poll for changes (views/changes.py).
 *
 * Pollers are hidden elements with data-live and hx-trigger="every Ns, live-poll". This file
 * only steers them (no inline script, no eval, so it works under the page's CSP):
 * - no poll while the browser tab is hidden; one at once when it is shown again;
 * - a session page's poll says which tab is open (data-live-tabs), so the server answers
 *   with new history rows only when the history is on screen;
 * - rows already on the page are never appended twice;
 * - when the history is drawn again (after a compaction), the markers and rows that were
 *   open are opened again.
 */
(function () {
  "use strict";

  var reopen = null;

  function isLive(elt) {
    return elt instanceof Element && elt.hasAttribute("data-live");
  }

  document.addEventListener("htmx:beforeRequest", function (event) {
    if (isLive(event.target) && document.visibilityState !== "visible") {
      event.preventDefault();
    }
  });

  document.addEventListener("htmx:configRequest", function (event) {
    var elt = event.target;
    if (!(isLive(elt) && elt.hasAttribute("data-live-tabs"))) { return; }
    var tab = document.querySelector("#session-tabs [role=tab][aria-selected=true]");
    event.detail.parameters.tab = tab ? tab.getAttribute("data-tab") : "history";
  });

  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState !== "visible" || !window.htmx) { return; }
    document.querySelectorAll("[data-live]").forEach(function (elt) {
      window.htmx.trigger(elt, "live-poll");
    });
  });

  document.addEventListener("htmx:oobBeforeSwap", function (event) {
    var detail = event.detail || {};
    var target = detail.target;
    if (!(target instanceof Element)) { return; }
    if (target.id === "history-items" && detail.fragment) {
      Array.prototype.slice.call(detail.fragment.children).forEach(function (row) {
        if (row.id && document.getElementById(row.id)) { row.remove(); }
      });
    }
    if (target.id === "history") {
      reopen = Array.prototype.slice.call(
        target.querySelectorAll("button.expander[aria-expanded=true]")
      ).map(function (button) { return button.getAttribute("aria-controls"); });
    }
  });

  // htmx:load, not oobAfterSwap: the new buttons' hx-get is live only once htmx processed them.
  document.addEventListener("htmx:load", function (event) {
    if (!reopen || !(event.target instanceof Element) || event.target.id !== "history") {
      return;
    }
    var ids = reopen;
    reopen = null;
    ids.forEach(function (id) {
      var button = document.querySelector(
        "#history button.expander[aria-expanded=false][aria-controls='" + id + "']");
      if (button) { button.click(); }
    });
  });
})();
