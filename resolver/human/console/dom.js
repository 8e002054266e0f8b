// Small shared helpers: building nodes (always as text, never markup), the status line, times
// in UTC with a relative age that keeps ticking, and the answer of a failed request in words.

export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  Object.entries(attrs || {}).forEach(([key, value]) => {
    if (value === null || value === undefined || value === false) return;
    if (key === "text") node.textContent = value;
    else if (key === "className") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  });
  children.flat().forEach((child) => {
    if (child === null || child === undefined || child === false) return;
    node.append(typeof child === "string" ? document.createTextNode(child) : child);
  });
  return node;
}

export function say(text, kind) {
  const status = document.getElementById("status");
  status.textContent = text;
  status.className = kind || "";
}

function pad(n) {
  return String(n).padStart(2, "0");
}

export function age(ms) {
  const seconds = Math.round((Date.now() - ms) / 1000);
  const abs = Math.abs(seconds);
  const [n, unit] = abs < 90 ? [abs, "s"] : abs < 5400 ? [Math.round(abs / 60), "min"]
    : abs < 129600 ? [Math.round(abs / 3600), "h"] : [Math.round(abs / 86400), "d"];
  return seconds >= 0 ? `${n} ${unit} ago` : `in ${n} ${unit}`;
}

// UTC with the relative age beside it: an on-call engineer reads both at a glance.
export function utc(ms) {
  const d = new Date(ms);
  return `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ` +
    `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())} UTC`;
}

// The relative age as a node that `tick` keeps true: a page left open never reads "in 1 s"
// about a time that passed long ago.
export function relative(ms, bare) {
  return el("span", { className: "age", "data-age-of": String(ms), "data-bare": bare ? "1" : null, text: bare ? age(ms) : `(${age(ms)})` });
}

export function when(ms) {
  if (ms === null || ms === undefined) return el("span", { text: "—" });
  const iso = new Date(ms).toISOString();
  return el("time", { datetime: iso, title: iso }, utc(ms), " ", relative(ms));
}

// Every relative age on the page, said again against the clock now.
export function tick() {
  document.querySelectorAll("[data-age-of]").forEach((node) => {
    const said = age(Number(node.dataset.ageOf));
    const text = node.dataset.bare ? said : `(${said})`;
    if (node.textContent !== text) node.textContent = text;
  });
}

export function caseLink(id) {
  return el("a", { href: "#/dispatch/" + encodeURIComponent(id), className: "mono", text: id });
}

export function problemText(answer) {
  const p = answer.body || {};
  const code = p.code || "http_" + answer.status;
  let text = `${answer.status || "no answer"} ${code}: ${p.title || "the request failed"}`;
  if (p.current) {
    text += ` Current state: ${p.current.state}, version ${p.current.version}` +
      (p.current.control_status ? `, control ${p.current.control_status}` : "") + ".";
  }
  return text;
}

export function copyButton(label, value) {
  return el("button", { type: "button", className: "copy", "aria-label": "Copy " + label, text: "Copy", onclick: async () => {
    try {
      await navigator.clipboard.writeText(value);
      say(`${label} copied.`, "ok");
    } catch (_e) {
      say(`Could not copy ${label}: select it and copy by hand.`, "error");
    }
  } });
}

// What was approved, in one cell: the title, then its facts.
export function summaryLine(summary) {
  const facts = (summary.facts || []).map((f) => `${f.label}: ${f.value}`).join(" · ");
  return el("span", { className: "summary" }, el("strong", { text: summary.title }), facts ? el("br") : null, facts ? el("span", { className: "hint", text: facts }) : null);
}

export function plural(n, one, several) {
  return n === 1 ? `1 ${one}` : `${n.toLocaleString("en")} ${several}`;
}
