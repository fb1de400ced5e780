/* ctxweb pages: expanders, expand/collapse all, tabs, refresh after actions, copy.
 *
 * No inline script anywhere (the CSP forbids it): behaviour hangs off classes and data-*
 * attributes through delegated listeners, so content swapped in by htmx works unchanged.
 *
 * Expanders are <button class="expander" aria-expanded aria-controls="region-id">. A lazy
 * expander also carries hx-get with hx-trigger="ctx-load": its region is fetched the first
 * time it opens, then only shown and hidden.
 */
(function () {
  "use strict";

  var EXPAND_ALL = "data-expanding-all";

  function regionOf(button) {
    var id = button.getAttribute("aria-controls");
    return id ? document.getElementById(id) : null;
  }

  function setExpanded(button, open) {
    var region = regionOf(button);
    button.setAttribute("aria-expanded", open ? "true" : "false");
    if (region) {
      region.hidden = !open;
    }
    if (open && button.hasAttribute("hx-get") && !button.hasAttribute("data-loaded")) {
      button.setAttribute("data-loaded", "");
      if (window.htmx) {
        // A button just swapped in gets its hx-get bound only when the swap settles: bind it
        // now (htmx skips an element it already processed), or the event would be lost.
        window.htmx.process(button);
        window.htmx.trigger(button, "ctx-load");
      }
    }
  }

  function expanders(root, state) {
    var selector = "button.expander[aria-expanded='" + state + "']";
    return Array.prototype.slice.call(root.querySelectorAll(selector));
  }

  // "Expand all" opens markers, messages and tool rows, not the heavier side views.
  function expandable(root) {
    return expanders(root, "false").filter(function (b) {
      return !b.hasAttribute("data-no-expand-all");
    });
  }

  function expandAll(root) {
    root.setAttribute(EXPAND_ALL, "");
    expandable(root).forEach(function (b) { setExpanded(b, true); });
  }

  function collapseAll(root) {
    root.removeAttribute(EXPAND_ALL);
    expanders(root, "true").forEach(function (b) { setExpanded(b, false); });
  }

  function selectTab(tab) {
    var list = tab.closest("[role=tablist]");
    if (!list) { return; }
    list.querySelectorAll("[role=tab]").forEach(function (t) {
      var selected = t === tab;
      t.setAttribute("aria-selected", selected ? "true" : "false");
      t.setAttribute("tabindex", selected ? "0" : "-1");
    });
    var panel = document.getElementById(tab.getAttribute("aria-controls"));
    if (panel) { panel.setAttribute("aria-labelledby", tab.id); }
  }

  function copyText(selector) {
    var node = document.querySelector(selector);
    if (node && navigator.clipboard) {
      navigator.clipboard.writeText(node.textContent || "");
    }
  }

  document.addEventListener("click", function (event) {
    var target = event.target instanceof Element ? event.target : null;
    if (!target) { return; }
    var button = target.closest("button.expander");
    if (button) {
      setExpanded(button, button.getAttribute("aria-expanded") !== "true");
      return;
    }
    var all = target.closest("[data-expand-all]");
    if (all) {
      var root = document.querySelector(all.getAttribute("data-expand-all"));
      if (root) { expandAll(root); }
      return;
    }
    var none = target.closest("[data-collapse-all]");
    if (none) {
      var scope = document.querySelector(none.getAttribute("data-collapse-all"));
      if (scope) { collapseAll(scope); }
      return;
    }
    var tab = target.closest("[role=tab]");
    if (tab) { selectTab(tab); return; }
    var copy = target.closest("[data-copy]");
    if (copy) { copyText(copy.getAttribute("data-copy")); return; }
    var clear = target.closest("[data-clear]");
    if (clear) {
      var box = document.querySelector(clear.getAttribute("data-clear"));
      if (box) { box.replaceChildren(); }
    }
  });

  // Tabs: arrow keys move between tabs (the ARIA tabs pattern); Enter/Space click them.
  document.addEventListener("keydown", function (event) {
    var target = event.target instanceof Element ? event.target : null;
    if (!target || target.getAttribute("role") !== "tab") { return; }
    if (event.key !== "ArrowRight" && event.key !== "ArrowLeft" &&
        event.key !== "Home" && event.key !== "End") { return; }
    var tabs = Array.prototype.slice.call(
      target.closest("[role=tablist]").querySelectorAll("[role=tab]"));
    var index = tabs.indexOf(target);
    if (event.key === "ArrowRight") { index = (index + 1) % tabs.length; }
    if (event.key === "ArrowLeft") { index = (index - 1 + tabs.length) % tabs.length; }
    if (event.key === "Home") { index = 0; }
    if (event.key === "End") { index = tabs.length - 1; }
    event.preventDefault();
    tabs[index].focus();
    tabs[index].click();
  });

  // Content loaded while "expand all" is on opens too, so nested markers unfold all the way.
  document.addEventListener("htmx:afterSettle", function (event) {
    var root = event.target instanceof Element ? event.target.closest("[" + EXPAND_ALL + "]") : null;
    if (root) {
      expandable(event.target).forEach(function (b) { setExpanded(b, true); });
    }
  });

  // A failed lazy load says so in its region instead of staying on "Loading…".
  document.addEventListener("htmx:responseError", function (event) {
    var detail = event.detail || {};
    var target = detail.target;
    var status = detail.xhr ? detail.xhr.status : "";
    if (target instanceof Element && !(target.id === "tab-panel")) {
      var note = document.createElement("p");
      note.className = "notice notice-error";
      note.textContent = "Could not load this part (HTTP " + status + ").";
      target.replaceChildren(note);
    }
  });

  // After an action changed the session, reload the open tab in place.
  //
  // Everything that fills #tab-panel is ordered by the tablist's hx-sync="this:replace": the
  // last request asked for wins and older ones are aborted, so a slow answer for a tab the
  // user already left can never replace the tab they chose. A panel load still in flight is
  // asked again (its answer may predate the change; asking again keeps its ?tab= push).
  // Otherwise the reload comes from the tablist, which has no hx-push-url (no new history
  // entry), with the page's query so options such as the context format stay as they are.
  document.body.addEventListener("session-changed", function () {
    if (!window.htmx) { return; }
    var pending = document.querySelector("[hx-target='#tab-panel'].htmx-request");
    if (pending) {
      window.htmx.trigger(pending, "click");
      return;
    }
    var tab = document.querySelector("[role=tab][aria-selected=true]");
    var list = tab ? tab.closest("[role=tablist]") : null;
    var panel = document.getElementById("tab-panel");
    if (tab && list && panel) {
      window.htmx.ajax("GET", tab.getAttribute("hx-get") + window.location.search,
        { source: list, target: panel, swap: "innerHTML" });
    }
  });
})();
