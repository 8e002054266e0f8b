// Routing: the URL fragment is the whole state of the page. The view modules ask for a redraw
// through `redraw`; the entry module says how (it owns the one render loop).
import { VIEWS } from "./views.js";

export function route() {
  const hash = window.location.hash.replace(/^#/, "");
  const match = /^\/dispatch\/(.+)$/.exec(hash);
  if (match) return { view: "case", id: decodeURIComponent(match[1]) };
  const [path, query] = hash.split("?");
  const view = path.replace(/^\//, "");
  if (view === "find" || view === "oldest") return { view, params: new URLSearchParams(query || "") };
  return { view: VIEWS[view] ? view : "queue", params: new URLSearchParams(query || "") };
}

export function listHash(view, params) {
  const query = params.toString();
  return "#/" + view + (query ? "?" + query : "");
}

export function setNav(view) {
  document.querySelectorAll("#nav a").forEach((link) => {
    if (link.dataset.view === view) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  });
}

let renderer = async () => {};

export function onRedraw(fn) {
  renderer = fn;
}

export function redraw(quiet) {
  return renderer(quiet);
}
