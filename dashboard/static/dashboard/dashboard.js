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

// A task's log on the workflow page: a tail on demand, Follow streams new lines as they come
// (the API's chunked text), Stop ends it. Without JavaScript: the server's tail and Download.
(function () {
  "use strict";

  async function load(details, follow, controller) {
    const pre = details.querySelector("pre.log");
    const state = details.querySelector("[data-log-state]");
    const lines = details.dataset.tailLines;
    const url = `${details.dataset.logUrl}&last_n_lines=${lines}&follow=${follow}`;
    const response = await fetch(url, { credentials: "same-origin", signal: controller.signal });
    if (!response.ok) {
      state.textContent = `could not load the log (${response.status})`;
      return;
    }
    pre.textContent = "";
    state.textContent = follow ? "following…" : `last ${lines} lines`;
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
      pre.textContent += decoder.decode(value, { stream: true });
      if (atBottom) pre.scrollTop = pre.scrollHeight;
    }
    if (follow) state.textContent = "the log ended";
  }

  document.querySelectorAll("details[data-log-url]").forEach((details) => {
    const button = details.querySelector("[data-log-follow]");
    let controller = null;
    details.addEventListener("toggle", () => {
      if (details.open && details.dataset.loaded === "false") {
        details.dataset.loaded = "true";
        load(details, false, new AbortController()).catch(() => {});
      }
    });
    button.addEventListener("click", () => {
      if (controller) {
        controller.abort();
        controller = null;
        button.textContent = "Follow";
        details.querySelector("[data-log-state]").textContent = "stopped";
        return;
      }
      controller = new AbortController();
      button.textContent = "Stop";
      const mine = controller;
      load(details, true, mine).catch(() => {}).finally(() => {
        if (controller === mine) {
          controller = null;
          button.textContent = "Follow";
        }
      });
    });
  });
})();

// A table wider than its card scrolls sideways: say so ("scroll →" above it, its right edge
// fading) until the reader reaches its end. Checked again on resize and when a region's HTML is
// swapped in by a refresh.
(function () {
  "use strict";

  function mark(wrap) {
    const overflows = wrap.scrollWidth > wrap.clientWidth + 1;
    wrap.classList.toggle("overflows", overflows);
    wrap.classList.toggle("at-end",
                          wrap.scrollLeft + wrap.clientWidth >= wrap.scrollWidth - 1);
    let hint = wrap.previousElementSibling;
    if (!hint || !hint.classList.contains("scroll-hint")) {
      if (!overflows) return;
      hint = document.createElement("p");
      hint.className = "scroll-hint";
      hint.setAttribute("aria-hidden", "true"); // the table itself is read whole
      hint.textContent = "scroll →";
      wrap.before(hint);
    }
    hint.hidden = !overflows;
  }

  function markAll() {
    document.querySelectorAll(".table-wrap").forEach((wrap) => {
      mark(wrap);
      if (!wrap.dataset.scrollCue) {
        wrap.dataset.scrollCue = "on";
        wrap.addEventListener("scroll", () => mark(wrap), { passive: true });
      }
    });
  }

  markAll();
  window.addEventListener("resize", markAll);
  new MutationObserver(markAll).observe(document.body, { childList: true, subtree: true });
})();
