// RelJudge: htmx error handling shared by every page. Nothing a user typed is lost on a failed request:
// htmx leaves the page as it is, and this file says what went wrong and how to retry.
(function () {
  "use strict";

  function banner(html) {
    var box = document.getElementById("net-error");
    if (!box) return;
    if (html) {
      box.innerHTML = html;
      box.hidden = false;
    } else {
      box.hidden = true;
      box.textContent = "";
    }
  }

  // Django's JavaScript catalog (base.html loads it first) translates; without it the English stays.
  var gettext = window.gettext || function (text) { return text; };
  var interpolate = window.interpolate || function (fmt, obj) {
    return fmt.replace(/%\(\w+\)s/g, function (m) { return String(obj[m.slice(2, -2)]); });
  };

  function explain(status) {
    if (status === 401) {
      // the login URL comes from {% url 'login' %} in base.html, so it follows the URL configuration
      return interpolate(gettext(
        '<strong>Your session has expired.</strong> <a href="%(login)s" target="_blank" rel="noopener">Log in again</a> ' +
        "in another tab, then come back and repeat your last action. Nothing on this page was lost."
      ), { login: document.body.dataset.loginUrl }, true);
    }
    if (status === 403) {
      return gettext("<strong>Not saved: the server refused the request</strong> (your login or this page may be out of date). " +
        "Copy any note you wrote, then reload the page.");
    }
    if (status === 404) {
      return gettext("<strong>Not found.</strong> This item no longer exists in the campaign; reload the page.");
    }
    if (status === 0) {
      return gettext("<strong>Could not reach the server: nothing was saved.</strong> What you typed is still here; " +
        "repeat your last action when the connection is back.");
    }
    return interpolate(gettext("<strong>The server failed to save this (error %(status)s).</strong> What you typed is still here; " +
      "repeat your last action to retry."), { status: status }, true);
  }

  document.addEventListener("htmx:beforeSwap", function (evt) {
    // 422 (invalid) and 409 (changed elsewhere) carry a re-rendered form with the message and the
    // submitted values: show it.
    var status = evt.detail.xhr.status;
    if (status === 422 || status === 409) {
      evt.detail.shouldSwap = true;
      evt.detail.isError = false;
    }
  });
  document.addEventListener("htmx:responseError", function (evt) {
    banner(explain(evt.detail.xhr.status));
  });
  document.addEventListener("htmx:sendError", function () { banner(explain(0)); });
  document.addEventListener("htmx:timeout", function () { banner(explain(0)); });
  // A request the user made clears the banner when it succeeds; a background one (the judging page's hold of
  // the pair it shows, data-hold) never does: it may finish after a save failed and must not hide that.
  document.addEventListener("htmx:afterRequest", function (evt) {
    var elt = evt.detail.elt;
    if (evt.detail.successful && !(elt && elt.hasAttribute && elt.hasAttribute("data-hold"))) banner(null);
  });

  window.RelJudge = { banner: banner };
})();

// A box that scrolls sideways (a wide table on a phone) or down (a long text) must be reachable by
// keyboard: it gets into the tab order, with the visible focus ring, only while it actually scrolls.
(function () {
  "use strict";
  var SELECTOR = ".table-wrap, .rv-doc-text, .rv-judgments-wrap, .lb-figure, .lb-heat-wrap";

  function mark(root) {
    var boxes = (root || document).querySelectorAll(SELECTOR);
    for (var i = 0; i < boxes.length; i++) {
      var box = boxes[i];
      var scrolls = box.scrollWidth > box.clientWidth + 1 || box.scrollHeight > box.clientHeight + 1;
      if (scrolls && !box.hasAttribute("tabindex")) {
        box.setAttribute("tabindex", "0");
        box.setAttribute("data-scroll-focus", "");
      } else if (!scrolls && box.hasAttribute("data-scroll-focus")) {
        box.removeAttribute("tabindex");
        box.removeAttribute("data-scroll-focus");
      }
      edges(box);
      if (!box.hasAttribute("data-edges")) {
        box.setAttribute("data-edges", "");
        box.addEventListener("scroll", function () { edges(this); }, { passive: true });
      }
    }
  }

  // Which side of a sideways-scrolling box has more to see: CSS fades that edge (data-more).
  function edges(box) {
    var left = box.scrollLeft > 1;
    var right = box.scrollLeft + box.clientWidth < box.scrollWidth - 1;
    var more = left && right ? "both" : left ? "left" : right ? "right" : "";
    if (more) box.setAttribute("data-more", more);
    else box.removeAttribute("data-more");
  }

  // The live leaderboard is swapped in anew every few seconds: keep where its table was scrolled to.
  var kept = {};
  document.addEventListener("htmx:beforeSwap", function (evt) {
    var box = evt.detail.target && evt.detail.target.querySelector && evt.detail.target.querySelector(".table-wrap");
    kept = box ? { id: evt.detail.target.id, left: box.scrollLeft } : {};
  });
  document.addEventListener("htmx:afterSettle", function () {
    var root = kept.id && document.getElementById(kept.id);
    var box = root && root.querySelector(".table-wrap");
    if (box && kept.left) box.scrollLeft = kept.left;
    kept = {};
  });
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", function () { mark(); });
  else mark();
  document.addEventListener("htmx:afterSettle", function () { mark(); });
  window.addEventListener("resize", function () { mark(); });
})();

// On a phone the campaign's navigation is one line that scrolls sideways: show the current page's link,
// not always the first few.
(function () {
  "use strict";
  function centre() {
    var nav = document.querySelector(".campaign-nav");
    var current = nav && nav.querySelector('[aria-current="page"]');
    if (!current || nav.scrollWidth <= nav.clientWidth) return;
    // The campaign's name stays at the start (sticky): centre the link in the room to its right.
    var name = nav.querySelector(".campaign-name");
    var pinned = name && getComputedStyle(name).position === "sticky" ? name.offsetWidth : 0;
    var room = nav.clientWidth - pinned;
    var at = current.getBoundingClientRect().left - nav.getBoundingClientRect().left + nav.scrollLeft;
    nav.scrollLeft = at - pinned - (room - current.offsetWidth) / 2;
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", centre); else centre();
})();

// Settings folded on a phone (the leaderboard's scoring controls): closed there when the page opens.
(function () {
  "use strict";
  function fold() {
    if (!window.matchMedia("(max-width: 700px)").matches) return;
    var folds = document.querySelectorAll("details.lb-fold[open]");
    for (var i = 0; i < folds.length; i++) folds[i].open = false;
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", fold); else fold();
})();
