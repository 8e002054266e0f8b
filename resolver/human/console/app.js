// The operator console: three lists, the case view and decisions, against the same-origin API.
// Data is only ever placed as text (textContent, attribute values): nothing from the server or
// the address bar becomes markup. All state a reload must keep lives in the URL fragment.
// This entry module owns the render loop, the start and the lists' refresh; each view lives in
// a module of its own.
// Each render draws into a slot of its own: a slower, older render (the operator changed the
// filter while a page was loading) then finishes into a detached slot instead of mixing its
// rows into the view on screen. `aria-busy` tells assistive technology (and anyone waiting
// for the page) that the view is being redrawn; `data-route` names the view that was drawn.
import * as auth from "./auth.js";
import { runBulk, updateBulkCount } from "./bulk.js";
import { renderCase } from "./case.js";
import { answersArea, send } from "./decide.js";
import { el, say } from "./dom.js";
import { find, renderFind, renderOldest } from "./find.js";
import { renderList } from "./lists.js";
import { onRedraw, route, setNav } from "./nav.js";
import { renderIdentity, updateSession } from "./session.js";
import { config, setConfig } from "./state.js";
import { VIEWS } from "./views.js";

let renders = 0;

// `quiet`: a refresh of the list on screen (polling). The new rows are drawn off screen and
// swapped in at once, keeping the scroll position, the focused control and the selection.
async function render(quiet) {
  const generation = ++renders;
  const where = route();
  setNav(where.view);
  const main = document.getElementById("main");
  const slot = el("div", { className: "view" });
  if (!quiet) {
    main.setAttribute("aria-busy", "true");
    main.replaceChildren(slot);
    say("");
  }
  renderIdentity();
  let moved = false;
  if (where.view === "case") await renderCase(slot, where.id);
  else if (where.view === "find") moved = await renderFind(slot, where.params.get("q") || "");
  else if (where.view === "oldest") moved = await renderOldest(slot, where.params);
  else await renderList(slot, where.view, where.params);
  // A find that names one dispatch moved on to its case: that render marks the page drawn.
  if (generation !== renders || moved) return;
  if (quiet) {
    const focused = document.activeElement && document.activeElement.id;
    const [x, y] = [window.scrollX, window.scrollY];
    main.replaceChildren(slot);
    updateBulkCount();
    window.scrollTo(x, y);
    if (focused && document.getElementById(focused)) document.getElementById(focused).focus({ preventScroll: true });
    return;
  }
  main.dataset.route = window.location.hash;
  main.setAttribute("aria-busy", "false");
  const heading = slot.querySelector("h2");
  if (heading && document.activeElement === document.body) heading.focus();
}

// After a sign-in that carried a request to resend: the view, then the request once more.
async function resume(result) {
  if (!result || !result.retry) return;
  const retry = result.retry;
  if (retry.kind === "bulk") {
    await render();
    await runBulk(retry.request);
    return;
  }
  await render();
  await send(answersArea(), retry.method, retry.path, retry.body, true);
}

async function loadConfig() {
  try {
    const response = await fetch("/console/config.json", { credentials: "same-origin" });
    if (response.ok) setConfig(await response.json());
  } catch (_e) {
    // Without it the console still works with a proxy-forwarded or pasted token.
  }
  auth.setConfig(config);
  const codes = document.getElementById("reason-codes");
  codes.replaceChildren(...(config.reason_codes || []).map((code) => el("option", { value: code })));
}

onRedraw(render);

document.addEventListener("DOMContentLoaded", async () => {
  auth.takeTokenFromFragment();
  document.getElementById("find").addEventListener("submit", (event) => {
    event.preventDefault();
    find(document.getElementById("find-q").value.trim());
  });
  await loadConfig();
  let result = null;
  try {
    result = await auth.finishSignIn();
  } catch (error) {
    await render();
    say("Sign-in failed: " + error.message, "error");
    return;
  }
  window.addEventListener("hashchange", () => render());
  if (result && result.retry) await resume(result);
  else await render();
  window.setInterval(updateSession, 15000);
  window.setInterval(refreshList, REFRESH_MS);
});

// Lists refresh on their own; never while the operator is filling a form on them (the typed
// reason and chosen decision would be lost), nor in a hidden tab.
const REFRESH_MS = 30000;

function refreshList() {
  const where = route();
  const main = document.getElementById("main");
  if (!VIEWS[where.view] || document.visibilityState !== "visible" || main.getAttribute("aria-busy") === "true") return;
  if (main.dataset.route !== window.location.hash) return;
  const form = document.getElementById("bulk-form");
  if (form && (form.querySelector("input[name=decision]:checked") || form.querySelector("#bulk-reason").value ||
    document.getElementById("bulk-summary") || document.getElementById("bulk-bar"))) return;
  if (document.activeElement && document.activeElement.closest("#filters")) return;
  render(true);
}
