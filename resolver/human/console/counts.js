// What a list counts: the line above its rows ("3 cases match the filter") and the triage
// counts by action type, reason, project and executor (each a link that adds its filter).
// Both are read again after every write the operator makes from the list, so neither keeps
// saying what was true before it.
import * as auth from "./auth.js";
import { el } from "./dom.js";
import { listHash } from "./nav.js";
import { reasonSentence } from "./reasons.js";
import { FINDINGS, OLDER_TOTAL_CAP, SORTS, TRIAGE, VIEWS, apiQuery, firstRow, isFiltered } from "./views.js";

function totalText(view, params, page) {
  const [one, several] = VIEWS[view].noun;
  const cap = typeof page.total_cap === "number" ? page.total_cap : OLDER_TOTAL_CAP;
  const many = page.total >= cap ? `${cap.toLocaleString("en")} or more ${several}` : page.total === 1 ? `1 ${one}` : `${page.total} ${several}`;
  const verb = page.total === 1 ? "matches" : "match";
  return isFiltered(view, params) ? `${many} ${verb} the filter` : `${many} in this list`;
}

export function countsText(view, params, page) {
  const filtered = isFiltered(view, params);
  const first = firstRow(params);
  const sorted = SORTS.find(([value]) => value && value === params.get("sort"));
  const order = view === "decided" ? "newest first" : sorted ? `${sorted[1]}, oldest first within` : "oldest first";
  const shown = page.items.length ? ` Showing rows ${first} to ${first + page.items.length - 1}, ${order}.` : "";
  if (typeof page.total === "number") return totalText(view, params, page) + "." + shown;
  // An older API's decisions list: no total, so say only whether more follow.
  if (view === "decided") {
    return (page.items.length ? shown.trim() : "No decision on this page.") + (page.next_cursor ? " More on the next page." : "");
  }
  // An older API: no totals, and it may ignore filters (this page was filtered here).
  return `${page.items.length} on this page.` + (filtered ? " This API reports no totals and filters nothing: the console filtered this page itself." : "");
}

// The triage counts, or an empty section when the API has none to give.
export async function triage(view, params) {
  const section = el("section", { id: "triage", "aria-label": "Counts by type, reason, project and executor" });
  const answer = await auth.api("GET", apiQuery(view, params, null, 1).replace("?", "/counts?"));
  if (!answer.ok) return section;
  TRIAGE.forEach(([dimension, title]) => {
    const counts = answer.body[dimension] || {};
    const list = el("ul", { className: "chips", id: "triage-" + dimension });
    Object.entries(counts).forEach(([value, n]) => {
      const next = new URLSearchParams(params);
      ["cursor", "from"].forEach((p) => next.delete(p));
      const name = dimension === "reason" ? (FINDINGS.includes(value) ? "last_finding" : "last_reason") : dimension;
      next.set(name, value);
      const sentence = dimension === "reason" ? reasonSentence(value) : null;
      const words = sentence ? ` (${sentence})` : "";
      list.append(el("li", {}, el("a", { href: listHash(view, next), title: value + words, text: `${value}: ${n}` })));
    });
    const datalist = document.getElementById("dl-" + dimension) || document.body.appendChild(el("datalist", { id: "dl-" + dimension }));
    datalist.replaceChildren(...Object.keys(counts).map((value) => el("option", { value })));
    if (list.children.length) section.append(el("div", { className: "triage" }, el("h3", { text: title }), list));
  });
  if (!section.children.length) section.append(el("p", { className: "hint", text: "Nothing to count." }));
  return section;
}

// After a write from the list: the total and the triage as they are now. The rows stay as
// they were loaded (each written one marked with its result), and the line says so.
export async function refreshCounts(view, params, rows) {
  if (!VIEWS[view]) return;
  const counts = document.getElementById("counts");
  const answer = await auth.api("GET", apiQuery(view, params, null, 1));
  if (counts && answer.ok && typeof answer.body.total === "number") {
    counts.textContent = `${totalText(view, params, answer.body)} now. The ${rows} below are as they were loaded, each written one marked with its result.`;
  }
  const old = document.getElementById("triage");
  if (old && view !== "decided") old.replaceWith(await triage(view, params));
}
