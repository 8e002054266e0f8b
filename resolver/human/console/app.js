// The operator console: three lists, the case view and decisions, against the same-origin API.
// Data is only ever placed as text (textContent, attribute values): nothing from the server or
// the address bar becomes markup. All state a reload must keep lives in the URL fragment (and
// the tab's sessionStorage: the token, the selection, the list a case was opened from).
// This entry module owns the render loop, the start and the clock (relative times, the
// session line, live refresh); each view lives in a module of its own.
import * as auth from "./auth.js";
import { runBulk, updateBulkCount } from "./bulk.js";
import { checkCase, renderCase } from "./case.js";
import { answersArea, send } from "./decide.js";
import { el, say, tick } from "./dom.js";
import { find, renderFind, renderOldest } from "./find.js";
import { renderList } from "./lists.js";
import { liveTick } from "./live.js";
import { onRedraw, route, setNav } from "./nav.js";
import { renderIdentity, updateSession } from "./session.js";
import { config, keepFormFor, restoreSelection, setConfig } from "./state.js";
import { VIEWS } from "./views.js";

// How long a new tab waits for an open tab of the console to share its session (only when
// one said it is open): its answer comes as soon as that tab's page runs, even on a busy machine.
const ASK_TABS_MS = 3000;

// Each render draws into a slot of its own: a slower, older render (the operator changed the
// filter while a page was loading) then finishes into a detached slot instead of mixing its
// rows into the view on screen. `aria-busy` tells assistive technology (and anyone waiting
// for the page) that the view is being redrawn; `data-route` names the view that was drawn.
let renders = 0;

// `quiet`: a refresh of the list on screen (live refresh). The new rows are drawn off screen
// and swapped in at once, keeping the scroll position, the focused control and the selection.
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
    // The operator started filling something in while this refresh was on its way: the view
    // on screen stays, everything typed and chosen with it.
    if (heldBy()) return;
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
  if (heading && document.activeElement === document.body) heading.focus({ preventScroll: true });
}

// After a sign-in that carried a request to resend: the view (with the decision's form as the
// operator filled it), then the request once more.
async function resume(result) {
  if (!result || !result.retry) return;
  const retry = result.retry;
  if (retry.kind === "bulk") {
    await render();
    await runBulk(retry.request);
    return;
  }
  if (retry.form) keepFormFor(retry.form.dispatchId, retry.form.values);
  await render();
  await send(answersArea(), retry.method, retry.path, retry.body, true, retry.form);
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

// The lists redraw off screen; never while the operator is filling in a bulk decision or a
// filter (the typed reason and chosen decision would be lost). An open case is read again and
// says when it changed.
function refreshNow() {
  return route().view === "case" ? checkCase() : render(true);
}

function heldBy() {
  const where = route();
  const main = document.getElementById("main");
  if (main.getAttribute("aria-busy") === "true" || main.dataset.route !== window.location.hash) return "the page loads";
  if (!VIEWS[where.view]) return null;
  const form = document.getElementById("bulk-form");
  if (form && (form.querySelector("input[name=decision]:checked") || form.querySelector("#bulk-reason").value ||
    document.getElementById("bulk-summary") || document.getElementById("bulk-bar"))) return "you fill in the bulk decision";
  if (document.activeElement && document.activeElement.closest("#filters")) return "you edit the filters";
  return null;
}

function everySecond() {
  auth.sayAlive();
  tick();
  updateSession();
  liveTick(refreshNow, heldBy);
}

onRedraw(render);

document.addEventListener("DOMContentLoaded", async () => {
  auth.takeTokenFromFragment();
  document.getElementById("find").addEventListener("submit", (event) => {
    event.preventDefault();
    find(document.getElementById("find-q").value.trim());
  });
  await loadConfig();
  // Another tab's sign-in or sign-out is this tab's too.
  auth.shareSession(() => render());
  restoreSelection();
  let result = null;
  try {
    result = await auth.finishSignIn();
  } catch (error) {
    await render();
    say("Sign-in failed: " + error.message, "error");
    return;
  }
  // A tab opened from a link (an alert's) takes the session of the console's open tabs.
  if (!auth.token() && !result && auth.signInAvailable()) await auth.askOtherTabs(ASK_TABS_MS);
  window.addEventListener("hashchange", () => render());
  if (result && result.retry) await resume(result);
  else await render();
  auth.sayAlive();
  window.addEventListener("pagehide", () => auth.sayGone());
  window.setInterval(everySecond, 1000);
});
