// The signed-in person in the header, when the token and the strong sign-in run out, and
// signing in (again, or stepping up) with the request to resend afterwards.
import * as auth from "./auth.js";
import { age, el, say, utc } from "./dom.js";
import { redraw } from "./nav.js";
import { config } from "./state.js";

export function renderIdentity() {
  const box = document.getElementById("identity");
  const claims = auth.tokenClaims();
  const parts = [];
  if (claims && claims.sub && sessionLeft(claims) <= 0) {
    // An expired token is not a signed-in session, whatever name it carries.
    parts.push(el("span", { id: "who", className: "error", text: `Your sign-in as ${claims.sub} has expired` }));
    if (auth.signInAvailable()) parts.push(el("button", { type: "button", id: "sign-in", text: "Sign in again", onclick: () => startSignIn() }));
  } else if (claims && claims.sub) {
    parts.push(el("span", { id: "who", text: `Signed in as ${claims.sub}` + (claims.amr ? ` (${[].concat(claims.amr).join(", ")})` : "") }));
    parts.push(el("button", { type: "button", id: "sign-out", text: "Sign out", onclick: () => { auth.signOut(); redraw(); } }));
    parts.push(el("span", { id: "session", role: "status", className: "hint" }));
  } else if (auth.signInAvailable()) {
    parts.push(el("button", { type: "button", id: "sign-in", text: "Sign in", onclick: () => startSignIn() }));
  }
  box.replaceChildren(...parts);
  updateSession();
}

// -- the session: when the token and the strong sign-in run out, said before it matters ------

const WARN_BEFORE_MS = 2 * 60 * 1000;

export function sessionLeft(claims) {
  return claims && claims.exp ? claims.exp * 1000 - Date.now() : Infinity;
}

function strongLeft(claims) {
  if (!claims || !claims.auth_time || !config.strong_auth_seconds) return Infinity;
  return (claims.auth_time + config.strong_auth_seconds) * 1000 - Date.now();
}

export function updateSession() {
  const line = document.getElementById("session");
  const claims = auth.tokenClaims();
  if (!claims) return;
  if (sessionLeft(claims) <= 0 && line) { renderIdentity(); return; }
  if (!line) return;
  const parts = [];
  if (claims.exp) parts.push(`session until ${utc(claims.exp * 1000).slice(11)} (${age(claims.exp * 1000)})`);
  const strong = strongLeft(claims);
  if (strong !== Infinity) {
    parts.push(strong > 0 ? `decisions without signing in again until ${utc(Date.now() + strong).slice(11)} (${age(Date.now() + strong)})`
      : "a decision will ask you to sign in again");
  }
  line.textContent = parts.join("; ");
  const soon = Math.min(sessionLeft(claims), strong) < WARN_BEFORE_MS;
  line.className = soon ? "warn" : "hint";
}

export async function startSignIn(stepUp, retry) {
  try {
    await auth.signIn(stepUp, retry);
  } catch (error) {
    say("Sign-in could not start: " + error.message, "error");
  }
}

export function needSignIn(main) {
  const section = el("section", { id: "signin", "aria-labelledby": "signin-title" },
    el("h2", { id: "signin-title", tabindex: "-1", text: "Sign in" }));
  if (auth.signInAvailable()) {
    section.append(el("p", { text: "Sign in with your organisation's identity provider." }),
      el("button", { type: "button", id: "signin-oidc", text: "Sign in", onclick: () => startSignIn() }));
  }
  const form = el("form", { id: "signin-form" },
    el("label", { for: "token", text: "Access token" }),
    el("input", { id: "token", name: "token", type: "password", autocomplete: "off", required: true }),
    el("button", { type: "submit", text: "Use token" }));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    auth.setToken(document.getElementById("token").value.trim());
    redraw();
  });
  section.append(el("p", { text: auth.signInAvailable() ? "Or paste an access token (it stays in this tab only)." :
    "No session was forwarded by your identity proxy. Paste an access token (it stays in this tab only)." }), form);
  main.replaceChildren(section);
  say("Not signed in.", "error");
}


export async function stepUp(answer, retry) {
  say("The API asks for a recent sign-in with a second factor: signing in again…", "");
  await startSignIn(auth.stepUpParameters(answer.headers) || { max_age: "300", acr_values: null }, { id: crypto.randomUUID(), ...retry });
}

// An expired (or revoked) token is treated like a step-up: sign in again, then the same request
// (the same mutation id: a replay if the first one did land) is sent once more.
export async function signInAgain(retry) {
  say("Your sign-in has expired: signing in again, then this decision is sent once more…", "");
  await startSignIn(null, { id: crypto.randomUUID(), ...retry });
}

