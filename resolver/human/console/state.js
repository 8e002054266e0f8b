// What the console holds between views: its configuration, the last list item seen of each
// dispatch and the bulk selection (which belongs to one list and filter).

export let config = { oidc: null, links: [], reason_codes: [] };
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


export function setConfig(value) {
  config = value;
}

// The selection follows one list and filter: true when `key` is a different one (and so the
// selection was cleared and now belongs to `key`).
export function selectionMovedTo(key) {
  if (selectionKey === key) return false;
  selected.clear();
  selectionKey = key;
  return true;
}
