// Runs before first paint: applies the remembered theme and installs the error banner that reports
// uncaught errors and rejected promises to the server while the page stays usable.
(function () {
  "use strict";
  var pref = "system";
  try {
    pref = localStorage.getItem("pydsh-theme") || "system";
  } catch (e) {
    pref = "system";
  }
  var dark = pref === "dark" || (pref === "system" && window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches);
  document.documentElement.setAttribute("data-theme", dark ? "dark" : "light");

  var sent = 0;
  function report(message, stack) {
    if (sent >= 20) return;
    sent += 1;
    try {
      fetch("/api/client-errors", {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ message: String(message).slice(0, 2000), stack: stack ? String(stack).slice(0, 8000) : undefined }),
      }).catch(function () {});
    } catch (e) {
      /* reporting must never fail the page */
    }
  }

  function banner(message) {
    var el = document.getElementById("banner");
    if (!el) return;
    document.getElementById("banner-text").textContent = "Something went wrong: " + String(message).split("\n")[0].slice(0, 200);
    el.hidden = false;
  }

  window.addEventListener("error", function (event) {
    if (!event.error && !event.message) return;
    banner(event.message || "an error");
    report(event.message, event.error && event.error.stack);
  });
  window.addEventListener("unhandledrejection", function (event) {
    var reason = event.reason || {};
    banner(reason.message || reason);
    report(reason.message || String(reason), reason.stack);
  });
  document.addEventListener("DOMContentLoaded", function () {
    var close = document.getElementById("banner-close");
    if (close) {
      close.addEventListener("click", function () {
        document.getElementById("banner").hidden = true;
      });
    }
  });
})();
