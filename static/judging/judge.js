// RelJudge judging page: keyboard shortcuts, time spent per judgment, and the guard that makes a double
// key press record once. The server does the rest (the htmx form works with the mouse alone too).
(function () {
  "use strict";

  // Django's JavaScript catalog (loaded by base.html) translates; without it the English stays.
  var gettext = window.gettext || function (text) { return text; };
  var interpolate = window.interpolate || function (fmt, obj) {
    return fmt.replace(/%\(\w+\)s/g, function (m) { return String(obj[m.slice(2, -2)]); });
  };

  var COOLDOWN_MS = 300; // after a new document appears, hold grade keys back this long (and say so): a
  //                        bounced key or double press must not grade the next document unseen.
  var busy = false;
  var readyAt = 0;
  var timer = { pairId: null, start: null, spent: 0 };

  function $(id) { return document.getElementById(id); }
  function judgeForm() { return $("judge-form"); }

  // ------------------------------------------------------------------ time spent on the current pair
  function timerSync() {
    var ws = document.querySelector("#judge .workspace");
    var id = ws ? ws.getAttribute("data-pair-id") : null;
    if (id !== timer.pairId) {
      // A new pair; a re-render of the same pair (an error, a conflict) keeps counting.
      timer = { pairId: id, start: document.hidden ? null : performance.now(), spent: 0 };
    }
  }
  function secondsSpent() {
    var ms = timer.spent + (timer.start === null ? 0 : performance.now() - timer.start);
    return Math.max(0, ms / 1000);
  }
  document.addEventListener("visibilitychange", function () {
    // Time in another tab is not time spent judging.
    if (document.hidden && timer.start !== null) {
      timer.spent += performance.now() - timer.start;
      timer.start = null;
    } else if (!document.hidden && timer.start === null) {
      timer.start = performance.now();
    }
  });
  document.addEventListener("submit", function (evt) {
    if (evt.target && evt.target.id === "judge-form") {
      var field = $("seconds");
      if (field) field.value = secondsSpent().toFixed(1);
    }
  }, true);

  // ------------------------------------------------------------------ request state
  // The hold a freshly opened page asks for (data-hold) runs in the background: keys stay live meanwhile.
  function isHold(evt) { return evt.detail && evt.detail.elt && evt.detail.elt.hasAttribute("data-hold"); }
  document.addEventListener("htmx:beforeRequest", function (evt) { if (!isHold(evt)) busy = true; });
  document.addEventListener("htmx:afterRequest", function (evt) { if (!isHold(evt)) busy = false; });
  document.addEventListener("htmx:afterSwap", function (evt) {
    if (!evt.detail.target || evt.detail.target.id !== "judge") return;
    var before = timer.pairId;
    timerSync();
    if (timer.pairId !== before) {
      readyAt = performance.now() + COOLDOWN_MS;
      // A new document starts where the last one did: bring the query back into view only when the
      // annotator had scrolled past it (reading a long document), never by jumping to the top of the page
      // (on a phone that hides the document under the header). The grades stay put in their sticky bar.
      var query = document.querySelector("#judge .query-card");
      if (query && query.getBoundingClientRect().top < 0) {
        query.scrollIntoView({ block: "start", behavior: "instant" });
      }
    }
    if (document.activeElement && document.activeElement !== document.body &&
        !$("judge").contains(document.activeElement)) {
      document.activeElement.blur();
    }
    unsureSync();
    if (carried && performance.now() < carried.until && timer.pairId !== before) {
      hint(interpolate(gettext("“%(key)s” was not recorded: it came while the last judgment was being saved. Press it again to judge this document."),
        { key: carried.label }, true), "held");
    }
    carried = null;
  });

  function ready() { return !busy && performance.now() >= readyAt; }

  // A key that comes too early is held back, never queued for the next document (that would grade a
  // document unseen) and never dropped without a word: the annotator is told to press it again.
  var carried = null; // a notice given while the last judgment was saving, shown again on the next document
  function heldBack(label) {
    if (busy) {
      carried = { label: label, until: performance.now() + 3000 };
      hint(interpolate(gettext("“%(key)s” was not recorded: the last judgment is still being saved. Press it again in a moment."),
        { key: label }, true), "held");
    } else {
      hint(interpolate(gettext("“%(key)s” was held back: a new document has just appeared. Press it again to judge this one."),
        { key: label }, true), "held");
    }
  }

  function submitWith(button, label) {
    var form = judgeForm();
    if (!form || !button) return;
    if (!ready()) { heldBack(label || button.textContent.trim()); return; }
    busy = true;
    window.setTimeout(function () { busy = false; }, 20000); // never stay locked if no request went out
    button.click(); // a click, not requestSubmit(): htmx sends the clicked button's name and value
  }

  function hint(text, kind) {
    var box = document.querySelector("#judge .notices");
    if (!box) return;
    if (kind) {
      var old = box.querySelector('[data-hint="' + kind + '"]');
      if (old) old.remove(); // one notice of a kind at a time, however fast the keys come
    }
    var p = document.createElement("p");
    p.className = "flash warn";
    if (kind) p.setAttribute("data-hint", kind);
    p.setAttribute("role", "status");
    p.textContent = text;
    box.appendChild(p);
    window.setTimeout(function () { p.remove(); }, 3000);
  }

  // ------------------------------------------------------------------ unsure mode
  function unsureSync() {
    var box = $("unsure"), form = judgeForm();
    if (box && form) form.classList.toggle("is-unsure", box.checked);
  }
  document.addEventListener("change", function (evt) {
    if (evt.target && evt.target.id === "unsure") unsureSync();
  });

  // ------------------------------------------------------------------ panels
  function toggleGuidelines(open) {
    var details = $("guidelines");
    if (!details) return;
    details.open = open === undefined ? !details.open : open;
  }
  function toggleShortcuts() {
    var dialog = $("shortcuts");
    if (!dialog) return;
    if (dialog.open) dialog.close(); else dialog.showModal();
  }
  document.addEventListener("click", function (evt) {
    if (evt.target.closest && evt.target.closest("[data-shortcuts]")) toggleShortcuts();
  });

  function typingIn(el) {
    if (!el) return false;
    if (el.isContentEditable || el.tagName === "TEXTAREA" || el.tagName === "SELECT") return true;
    return el.tagName === "INPUT" && !/^(checkbox|radio|button|submit|reset|hidden)$/.test(el.type);
  }

  function clickIfPresent(id) {
    var el = $(id);
    if (el && !busy) { el.click(); return true; }
    return false;
  }

  // ------------------------------------------------------------------ keys
  document.addEventListener("keydown", function (evt) {
    if (evt.ctrlKey || evt.metaKey || evt.altKey || evt.isComposing) return;
    var key = evt.key;
    if (typingIn(evt.target)) {
      if (key === "Escape") { evt.target.blur(); evt.preventDefault(); }
      return;
    }
    var dialog = $("shortcuts");
    if (dialog && dialog.open) {
      if (key === "?") { dialog.close(); evt.preventDefault(); }
      return; // Esc closes the dialog natively
    }
    if (key === "?") { toggleShortcuts(); evt.preventDefault(); return; }
    if (key === "g") { toggleGuidelines(); evt.preventDefault(); return; }

    var form = judgeForm();
    if (key === "Backspace" || key === "ArrowLeft") {
      evt.preventDefault();
      if (!evt.repeat) clickIfPresent("back-link");
      return;
    }
    if (key === "ArrowRight") {
      evt.preventDefault();
      if (!evt.repeat) clickIfPresent("forward-link");
      return;
    }
    if (!form) return;
    if (evt.repeat) { evt.preventDefault(); return; } // a held key records once

    if (/^[0-9]$/.test(key)) {
      evt.preventDefault();
      var button = form.querySelector('button.grade[data-grade="' + key + '"]');
      if (!button) {
        hint(interpolate(gettext("There is no grade %(grade)s on this campaign's scale."), { grade: key }, true));
        return;
      }
      submitWith(button, key);
    } else if (key === "u") {
      evt.preventDefault();
      var box = $("unsure");
      box.checked = !box.checked;
      unsureSync();
    } else if (key === "Enter") {
      if ($("unsure").checked) { evt.preventDefault(); submitWith($("save-unsure"), "Enter"); }
    } else if (key === "Escape") {
      $("unsure").checked = false;
      unsureSync();
    } else if (key === "n") {
      evt.preventDefault();
      var note = $("note");
      note.focus();
      note.setSelectionRange(note.value.length, note.value.length);
    } else if (key === "s") {
      evt.preventDefault();
      if (ready()) clickIfPresent("skip-button");
      else if ($("skip-button")) heldBack("s");
    }
  });

  function init() {
    timerSync();
    unsureSync();
    var details = $("guidelines");
    if (details) {
      // Remember whether the annotator keeps the guidelines open.
      var saved = window.localStorage && window.localStorage.getItem("reljudge.guidelines");
      var quiet = false;
      if (saved === "closed" || (saved === null && window.matchMedia("(max-width: 980px)").matches)) {
        quiet = saved === null; // closed for a small screen, not by the annotator: do not remember it
        details.open = false; // on a small screen the document comes first
      }
      details.addEventListener("toggle", function () {
        if (quiet) { quiet = false; return; }
        try { window.localStorage.setItem("reljudge.guidelines", details.open ? "open" : "closed"); } catch (e) { /* private mode */ }
      });
    }
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init); else init();
})();
