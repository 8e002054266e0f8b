// What the console holds between views: its configuration, the last list item seen of each
// dispatch, the bulk selection (which belongs to one list and filter) and the list a case was
// opened from. The selection and that list are kept in this tab's sessionStorage too, so going
// back (or a reload) finds them as they were.

const SELECTION_KEY = "resolver.selection";
const LIST_KEY = "resolver.last-list";

export let config = { oidc: null, links: [], reason_codes: [], evidence_reasons: {} };

export function setConfig(value) {
  config = value;
}

export const known = new Map(); // dispatch_id -> the last list item seen for it

// The bulk selection belongs to one list and filter: another filter (or list) clears it, so a
// decision can never reach a case the filter on screen leaves out. Another page of the same
// filter keeps it, counted as "selected outside this page" with a way to see them.
export const selected = new Set();
let selectionKey = null;

export function filterKey(view, params) {
  const p = new URLSearchParams(params);
  ["cursor", "from", "limit"].forEach((name) => p.delete(name));
  p.sort();
  return view + "?" + p.toString();
}

// The selection follows one list and filter: true when `key` is a different one (and so the
// selection was cleared and now belongs to `key`).
export function selectionMovedTo(key) {
  if (selectionKey === key) return false;
  selected.clear();
  selectionKey = key;
  keepSelection();
  return true;
}

// Each selected id with the list item it was selected from: a bulk decision sends the
// version each row showed, and checks each item against the filter again.
export function keepSelection() {
  const items = Array.from(selected, (id) => known.get(id)).filter(Boolean);
  sessionStorage.setItem(SELECTION_KEY, JSON.stringify({ key: selectionKey, items }));
}

export function restoreSelection() {
  let kept = null;
  try {
    kept = JSON.parse(sessionStorage.getItem(SELECTION_KEY) || "null");
  } catch (_e) {
    kept = null;
  }
  if (!kept || typeof kept.key !== "string" || !Array.isArray(kept.items)) return;
  selectionKey = kept.key;
  kept.items.forEach((item) => {
    if (!item || typeof item.dispatch_id !== "string") return;
    known.set(item.dispatch_id, item);
    selected.add(item.dispatch_id);
  });
}

// The list (view, filter and page) a case was opened from: "back" returns there.
export function rememberList(hash) {
  sessionStorage.setItem(LIST_KEY, hash);
}

export function lastList() {
  return sessionStorage.getItem(LIST_KEY) || "#/queue";
}

// A decision's form as it was filled when a sign-in interrupted it: the case view puts it
// back once, so nothing the operator chose is lost.
let pendingForm = null;

export function keepFormFor(dispatchId, values) {
  pendingForm = { dispatchId, values };
}

export function takeFormFor(dispatchId) {
  if (!pendingForm || pendingForm.dispatchId !== dispatchId) return null;
  const { values } = pendingForm;
  pendingForm = null;
  return values;
}
