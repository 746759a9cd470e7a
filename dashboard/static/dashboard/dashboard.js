// Live figures without a full reload: every [data-refresh-url] region re-fetches its fragment
// every few seconds and swaps its HTML in. Without JavaScript the pages are complete, only static.
(function () {
  "use strict";

  function keepOpenDetails(region, update) {
    // A refresh must not fold what the reader unfolded.
    const open = Array.from(region.querySelectorAll("details[open][id]"), (d) => d.id);
    update();
    open.forEach((id) => {
      const details = document.getElementById(id);
      if (details) details.open = true;
    });
  }

  function watch(region) {
    const url = region.dataset.refreshUrl;
    const delay = Math.max(Number(region.dataset.refreshSeconds) || 5, 1) * 1000;
    let stopped = false;

    async function refresh() {
      // Skip a beat while the tab is hidden or the reader is working inside the region.
      if (!document.hidden && !region.contains(document.activeElement)) {
        region.setAttribute("aria-busy", "true");
        try {
          const response = await fetch(url, {
            credentials: "same-origin",
            headers: { "X-Requested-With": "fetch" },
          });
          if (response.redirected || response.status === 401 || response.status === 403) {
            stopped = true; // signed out: a reload shows the login page
          } else if (response.ok) {
            const html = await response.text();
            keepOpenDetails(region, () => { region.innerHTML = html; });
          }
        } catch (error) {
          // Offline or restarting: keep the last figures and try again later.
        } finally {
          region.removeAttribute("aria-busy");
        }
      }
      if (!stopped) window.setTimeout(refresh, delay);
    }

    window.setTimeout(refresh, delay);
  }

  document.querySelectorAll("[data-refresh-url]").forEach(watch);
})();
