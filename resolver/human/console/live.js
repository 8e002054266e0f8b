// Live refresh, visible and under the operator's control: a line above each list and case says
// when the view was last read, when it is read next, or why it is not (paused, a form being
// filled in, a hidden tab), with a button that pauses and resumes. The entry module calls
// `liveTick` every second with what a refresh of the view on screen means.
import { el, relative, utc } from "./dom.js";

const PAUSED_KEY = "resolver.live.paused";

let every = 30000;
let lastAt = null;
let dueAt = Infinity;
let running = false;

function paused() {
  return sessionStorage.getItem(PAUSED_KEY) === "1";
}

// The line for a view refreshed every `everyMs`; `noun` says what a refresh reads.
export function liveBar(everyMs, noun) {
  every = everyMs;
  lastAt = Date.now();
  dueAt = lastAt + every;
  running = false;
  const toggle = el("button", { type: "button", id: "live-pause", className: "secondary-quiet", onclick: () => {
    if (paused()) sessionStorage.removeItem(PAUSED_KEY);
    else sessionStorage.setItem(PAUSED_KEY, "1");
    // Resuming reads at once: the operator asked to see what changed.
    if (!paused()) dueAt = Date.now();
    show();
  } });
  const bar = el("div", { id: "live", className: "live", "data-noun": noun },
    el("span", { id: "live-state" }), " ", toggle);
  show(bar);
  return bar;
}

function show(root, why) {
  const bar = root || document.getElementById("live");
  if (!bar) return;
  const state = bar.querySelector("#live-state");
  const toggle = bar.querySelector("#live-pause");
  const seconds = Math.round(every / 1000);
  const read = bar.dataset.noun;
  bar.dataset.mode = running ? "updating" : paused() ? "paused" : why ? "held" : "live";
  const at = [`read ${utc(lastAt).slice(11, 19)} UTC `, relative(lastAt)];
  if (running) state.replaceChildren(`Reading ${read} again…`);
  else if (paused()) state.replaceChildren("Paused: ", ...at, ".");
  else if (why) state.replaceChildren(`Held while ${why}: `, ...at, ".");
  else state.replaceChildren("Live: ", ...at, `, every ${seconds} s.`);
  toggle.textContent = paused() ? "Resume" : "Pause";
  toggle.setAttribute("aria-label", paused() ? `Resume live updates of ${read}` : `Pause live updates of ${read}`);
}

// Every second: refresh when due, unless paused, hidden, or `heldBy()` names a reason (the
// operator is filling in a form a redraw would lose).
export async function liveTick(refresh, heldBy) {
  const bar = document.getElementById("live");
  if (!bar || running) return;
  const why = heldBy();
  if (paused() || why || document.visibilityState !== "visible" || Date.now() < dueAt) {
    show(bar, why);
    return;
  }
  running = true;
  show(bar);
  try {
    await refresh();
  } finally {
    running = false;
    lastAt = Date.now();
    dueAt = lastAt + every;
    show();
  }
}
