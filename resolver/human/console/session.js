// The signed-in person in the header, when the token and the strong sign-in run out, and
// signing in (silently when the identity provider's session allows it, again, or stepping up)
// with the request to resend afterwards.
import * as auth from "./auth.js";
import { age, el, say, utc } from "./dom.js";
import { redraw } from "./nav.js";
import { config } from "./state.js";

const WARN_BEFORE_MS = 2 * 60 * 1000;

// The header says who is signed in only while that is true: an expired token, or one the API
// refused, is not a session, whatever name it carries.
export function renderIdentity() {
  const box = document.getElementById("identity");
  const claims = auth.tokenClaims();
  const parts = [];
  const lapsed = claims && claims.sub && (sessionLeft(claims) <= 0 || auth.tokenRefused());
  if (lapsed) {
    const why = auth.tokenRefused() ? "is no longer accepted" : "has expired";
    parts.push(el("span", { id: "who", className: "error", "data-state": "lapsed", text: `Your sign-in as ${claims.sub} ${why}` }));
    if (auth.signInAvailable()) parts.push(el("button", { type: "button", id: "sign-in", text: "Sign in again", onclick: () => startSignIn() }));
  } else if (claims && claims.sub) {
    parts.push(el("span", { id: "who", "data-state": "signed-in", text: `Signed in as ${claims.sub}` + (claims.amr ? ` (${amrText(claims)})` : "") }));
    parts.push(el("button", { type: "button", id: "sign-out", text: "Sign out", onclick: () => { auth.signOut(); redraw(); } }));
    parts.push(el("span", { id: "session", className: "hint", title: "How long this sign-in lasts, and until when it is recent and strong enough for a decision without signing in again" }));
  } else if (auth.signInAvailable()) {
    parts.push(el("button", { type: "button", id: "sign-in", text: "Sign in", onclick: () => startSignIn() }));
  }
  box.replaceChildren(...parts);
  updateSession();
}

export function amrText(claims) {
  return [].concat(claims.amr || []).join(", ");
}

function sessionLeft(claims) {
  return claims && claims.exp ? claims.exp * 1000 - Date.now() : Infinity;
}

function strongLeft(claims) {
  if (!claims || !claims.auth_time || !config.strong_auth_seconds) return Infinity;
  return (claims.auth_time + config.strong_auth_seconds) * 1000 - Date.now();
}

// Whether a decision sent now would carry a token the API takes (not expired, not refused).
export function tokenWorks() {
  const claims = auth.tokenClaims();
  return !claims || (sessionLeft(claims) > 0 && !auth.tokenRefused());
}

// Called every second: the header turns to "expired" when the token does, and says until when
// the sign-in and the strong sign-in last, warning two minutes before either.
export function updateSession() {
  const who = document.getElementById("who");
  const claims = auth.tokenClaims();
  const lapsed = Boolean(claims && claims.sub && !tokenWorks());
  if (who && (who.dataset.state === "lapsed") !== lapsed) { renderIdentity(); return; }
  const line = document.getElementById("session");
  if (!claims || !line) return;
  const parts = [];
  if (claims.exp) parts.push(`session until ${utc(claims.exp * 1000).slice(11)} (${age(claims.exp * 1000)})`);
  const strong = strongLeft(claims);
  if (strong !== Infinity) {
    parts.push(strong > 0 ? `decisions until ${utc(Date.now() + strong).slice(11)} (${age(Date.now() + strong)})`
      : "a decision will ask you to sign in again");
  }
  const text = parts.join("; ");
  if (line.textContent !== text) line.textContent = text;
  line.className = Math.min(sessionLeft(claims), strong) < WARN_BEFORE_MS ? "warn" : "hint";
}

async function startSignIn(stepUp, retry, silent) {
  try {
    await auth.signIn(stepUp, retry, silent);
  } catch (error) {
    say("Sign-in could not start: " + error.message, "error");
  }
}

// A read answered 401. When the identity provider may still know this browser, sign in
// without showing anything (the provider answers at once, or says a sign-in is needed, and
// the page comes back here); otherwise ask.
export function needSignIn(main) {
  if (auth.silentSignInAllowed()) {
    main.replaceChildren(el("section", { id: "signin", "aria-labelledby": "signin-title" },
      el("h2", { id: "signin-title", tabindex: "-1", text: "Signing in…" }),
      el("p", { text: "Asking your organisation's identity provider whether you are still signed in there." })));
    startSignIn(null, null, true);
    return;
  }
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
  section.append(el("p", { text: auth.signInAvailable() ? "Or paste an access token (it stays in this browser's console tabs only)." :
    "No session was forwarded by your identity proxy. Paste an access token (it stays in this browser's console tabs only)." }), form);
  main.replaceChildren(section);
  say("Not signed in.", "error");
}

// The API asks for a recent sign-in with a second factor (RFC 9470): sign in with its
// parameters, then the same request (the same mutation id) is sent once more.
export async function stepUp(answer, retry) {
  say("A decision needs a recent sign-in with a second factor: signing in again, then it is sent once more with everything you chose.", "");
  await startSignIn(auth.stepUpParameters(answer.headers) || strongSignIn(), { id: crypto.randomUUID(), ...retry });
}

// An expired or refused token, when a decision is to be sent: sign in again as a decision
// needs it (recent, with a second factor), so the provider shows its form when it must and
// answers silently when its session is strong and recent enough; then the same request (the
// same mutation id: a replay if the first one did land) is sent once.
export async function signInAgain(retry) {
  say("Your sign-in is no longer valid: signing in again, then your decision is sent once more with everything you chose.", "");
  await startSignIn(strongSignIn(), { id: crypto.randomUUID(), ...retry });
}

function strongSignIn() {
  return { max_age: String(config.strong_auth_seconds || 300), acr_values: config.step_up_acr_values || null };
}
