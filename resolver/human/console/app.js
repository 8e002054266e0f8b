"use strict";
// The operator console: lists the manual queue and submits decisions to the same-origin API.
// Data is only ever placed with textContent: nothing from the server becomes markup.

const TOKEN_KEY = "resolver.token";
let cursor = null;

function headers() {
  const token = sessionStorage.getItem(TOKEN_KEY);
  const h = { "Content-Type": "application/json" };
  if (token) h.Authorization = "Bearer " + token;
  return h;
}

function say(text, kind) {
  const el = document.getElementById("status");
  el.textContent = text;
  el.className = kind || "";
}

async function problem(response) {
  try {
    const body = await response.json();
    return body;
  } catch (_e) {
    return { code: "http_" + response.status, title: "unexpected answer " + response.status };
  }
}

function explain(p) {
  if (p.code === "step_up_required") return "Sign in again with a second factor, then retry: " + p.title;
  return p.title;
}

async function loadQueue(reset) {
  if (reset) {
    cursor = null;
    document.querySelector("#queue tbody").replaceChildren();
  }
  const url = "/v1/manual-queue?limit=50" + (cursor ? "&cursor=" + encodeURIComponent(cursor) : "");
  const response = await fetch(url, { headers: headers(), credentials: "same-origin" });
  if (response.status === 401) {
    document.getElementById("signin").hidden = false;
    say("Not signed in.", "error");
    return;
  }
  if (!response.ok) {
    say(explain(await problem(response)), "error");
    return;
  }
  document.getElementById("signin").hidden = true;
  const page = await response.json();
  page.items.forEach(addRow);
  cursor = page.next_cursor;
  document.getElementById("more").hidden = !cursor;
  const count = document.querySelectorAll("#queue tbody tr").length;
  document.getElementById("queue").hidden = count === 0;
  document.getElementById("empty").hidden = count !== 0;
  say(count + " waiting.");
}

function addRow(item) {
  const row = document.getElementById("row").content.firstElementChild.cloneNode(true);
  row.dataset.dispatchId = item.dispatch_id;
  row.querySelector(".dispatch").textContent = item.dispatch_id;
  row.querySelector(".project").textContent = item.project_id;
  row.querySelector(".action").textContent = item.action_type;
  row.querySelector(".finding").textContent = (item.last_finding || "—") + " ×" + item.finding_count;
  row.querySelector(".since").textContent = new Date(item.manual_at_ms).toISOString();
  const form = row.querySelector("form");
  // One mutation id per form: a resubmission after a lost answer replays, never doubles.
  form.dataset.mutationId = crypto.randomUUID();
  form.addEventListener("submit", (event) => decide(event, item, form, row));
  document.querySelector("#queue tbody").appendChild(row);
}

async function decide(event, item, form, row) {
  event.preventDefault();
  const data = new FormData(form);
  const out = form.querySelector(".result");
  const button = form.querySelector("button");
  button.disabled = true;
  const body = {
    decision: data.get("decision"),
    reason_code: data.get("reason_code"),
    mutation_id: form.dataset.mutationId,
    expected_execution_version: item.execution_version,
  };
  const url = "/v1/dispatches/" + encodeURIComponent(item.dispatch_id) + "/resolution";
  const response = await fetch(url, {
    method: "POST", headers: headers(), credentials: "same-origin", body: JSON.stringify(body),
  });
  if (response.ok) {
    const result = await response.json();
    say(item.dispatch_id + " is now " + result.outcome + " (" + result.result + ").", "ok");
    row.remove();
    if (!document.querySelector("#queue tbody tr")) {
      document.getElementById("queue").hidden = true;
      document.getElementById("empty").hidden = false;
    }
    return;
  }
  const p = await problem(response);
  out.textContent = explain(p);
  out.className = "result error";
  button.disabled = false;
}

// A link may carry a token in its fragment (`#token=…`, as `resolver demo --live` prints):
// browsers never send the fragment to a server, and it is removed from the address bar and
// history before anything else runs, so the token lands only in this tab's session storage.
function takeTokenFromFragment() {
  const match = /^#token=([A-Za-z0-9._-]+)$/.exec(window.location.hash);
  if (!match) return;
  sessionStorage.setItem(TOKEN_KEY, match[1]);
  history.replaceState(null, "", window.location.pathname + window.location.search);
}

document.addEventListener("DOMContentLoaded", () => {
  takeTokenFromFragment();
  document.getElementById("signin-form").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, document.getElementById("token").value.trim());
    document.getElementById("token").value = "";
    loadQueue(true);
  });
  document.getElementById("more").addEventListener("click", () => loadQueue(false));
  loadQueue(true);
});
