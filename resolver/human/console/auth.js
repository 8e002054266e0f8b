// Signing in and talking to the API.
//
// Three ways to hold a token, in this order: an OIDC sign-in (authorization code + PKCE as a
// public client, when /console/config.json names a client), a link carrying `#token=…` (the
// demo), or none at all (an identity proxy adds the Authorization header). Tokens live only in
// the sessionStorage of the console's open tabs: never a cookie, never localStorage (which
// holds only when a tab last said it is open), never a URL sent to a server. The console's tabs of one browser share one session: a new tab asks
// the others (a same-origin BroadcastChannel) before it signs in, and a sign-in or sign-out in
// one tab reaches the rest.

const TOKEN_KEY = "resolver.token";
const PENDING_KEY = "resolver.oidc.pending";
const SILENT_KEY = "resolver.oidc.silent-at";
// Set by "Sign out": no silent sign-in until the person signs in again themselves.
const OUT_KEY = "resolver.signed-out";
const CHANNEL = "resolver.console.session";
// When a console tab with a working session last said it is open (a time, nothing secret):
// a new tab waits for an answer only while one may come.
const ALIVE_KEY = "resolver.console.alive";
const ALIVE_WITHIN_MS = 5000;
// One silent sign-in (`prompt=none`) per tab in this long at most: an identity provider that
// answers but whose token the API refuses must not bounce the tab back and forth.
const SILENT_EVERY_MS = 60 * 1000;

let config = { oidc: null, links: [], reason_codes: [] };
let channel = null;
// The token the API last refused (401 invalid_token): the header must not call it signed in.
let refused = null;

export function setConfig(value) {
  config = value;
}

export function signInAvailable() {
  return Boolean(config.oidc);
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

function claimsOf(value) {
  if (!value) return null;
  try {
    return JSON.parse(b64urlDecode(value.split(".")[1]));
  } catch (_e) {
    return null;
  }
}

function expired(value) {
  const claims = claimsOf(value);
  return !claims || (typeof claims.exp === "number" && claims.exp * 1000 <= Date.now());
}

export function setToken(value) {
  sessionStorage.setItem(TOKEN_KEY, value);
  refused = null;
  if (channel) channel.postMessage({ type: "token", token: value });
}

export function signOut() {
  sessionStorage.removeItem(TOKEN_KEY);
  sessionStorage.setItem(OUT_KEY, "1");
  if (channel) channel.postMessage({ type: "signout" });
}

// The API said this token is no good (expired early, revoked, or signed by a retired key).
export function refuseToken() {
  refused = token();
}

export function tokenRefused() {
  return refused !== null && refused === token();
}

// Another tab's token is taken when this tab has none that works, or when it is the same
// person's newer one; never to switch this tab to another person under its form.
function better(value) {
  const mine = token();
  if (!mine || expired(mine) || tokenRefused()) return !expired(value);
  const [ours, theirs] = [claimsOf(mine), claimsOf(value)];
  return Boolean(theirs && ours && theirs.sub === ours.sub && (theirs.exp || 0) > (ours.exp || 0));
}

// Listens to the console's other tabs: answers a new tab's question with this tab's working
// token, takes a better token another tab signed in with, and signs out with the others.
// `changed` is called when this tab's session changed because of another tab.
export function shareSession(changed) {
  if (!("BroadcastChannel" in window) || channel) return;
  channel = new BroadcastChannel(CHANNEL);
  channel.addEventListener("message", (event) => {
    const message = event.data || {};
    const mine = token();
    if (message.type === "ask" && mine && !expired(mine) && !tokenRefused()) {
      channel.postMessage({ type: "token", token: mine });
    } else if (message.type === "token" && typeof message.token === "string" && better(message.token)) {
      sessionStorage.setItem(TOKEN_KEY, message.token);
      refused = null;
      changed();
    } else if (message.type === "signout") {
      sessionStorage.setItem(OUT_KEY, "1");
      if (mine) {
        sessionStorage.removeItem(TOKEN_KEY);
        changed();
      }
    }
  });
}

// Called every second by a tab: while its session works, the others know a tab can answer.
export function sayAlive() {
  const mine = token();
  if (mine && !expired(mine) && !tokenRefused()) localStorage.setItem(ALIVE_KEY, String(Date.now()));
}

// A tab that closes stops saying so (another open tab says it again within a second).
export function sayGone() {
  localStorage.removeItem(ALIVE_KEY);
}

// A tab opened without a token (an alert's link, a pasted link) asks the open tabs for theirs,
// when one said it is open in the last few seconds; null when none answers within `waitMs`.
export function askOtherTabs(waitMs) {
  const alive = Number(localStorage.getItem(ALIVE_KEY) || 0);
  if (!channel || Date.now() - alive > ALIVE_WITHIN_MS) return Promise.resolve(null);
  return new Promise((resolve) => {
    const answered = (event) => {
      const message = event.data || {};
      if (message.type !== "token" || typeof message.token !== "string" || expired(message.token)) return;
      channel.removeEventListener("message", answered);
      window.clearTimeout(timer);
      sessionStorage.setItem(TOKEN_KEY, message.token);
      resolve(message.token);
    };
    const timer = window.setTimeout(() => {
      channel.removeEventListener("message", answered);
      resolve(null);
    }, waitMs);
    channel.addEventListener("message", answered);
    channel.postMessage({ type: "ask" });
  });
}

// Whether a silent sign-in may be tried now (at most one per tab every minute).
export function silentSignInAllowed() {
  const last = Number(sessionStorage.getItem(SILENT_KEY) || 0);
  return signInAvailable() && !sessionStorage.getItem(OUT_KEY) && Date.now() - last > SILENT_EVERY_MS;
}

// Who the token says you are (for display only: the API verifies every token itself).
export function tokenClaims() {
  return claimsOf(token());
}

// One request to the API. The answer is always {status, ok, body, headers}; a body that is not
// JSON becomes a problem-like object, so callers show every answer as it came back.
export async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  const value = token();
  if (value) headers.Authorization = "Bearer " + value;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(path, {
      method, headers, credentials: "same-origin", body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (_e) {
    return { status: 0, ok: false, body: { code: "network", title: "the API could not be reached" }, headers: new Headers() };
  }
  let parsed;
  try {
    parsed = await response.json();
  } catch (_e) {
    parsed = { code: "http_" + response.status, title: "unexpected answer " + response.status };
  }
  return { status: response.status, ok: response.ok, body: parsed, headers: response.headers };
}

// RFC 9470: `WWW-Authenticate: Bearer error="insufficient_user_authentication", acr_values="…",
// max_age=300` asks for a new authorization request with those parameters.
export function stepUpParameters(headers) {
  const header = headers.get("WWW-Authenticate") || "";
  if (!/error="insufficient_user_authentication"/.test(header)) return null;
  const acr = /acr_values="([^"]*)"/.exec(header);
  const maxAge = /max_age="?(\d+)"?/.exec(header);
  return { acr_values: acr ? acr[1] : null, max_age: maxAge ? maxAge[1] : null };
}

function b64url(bytes) {
  let text = "";
  bytes.forEach((b) => { text += String.fromCharCode(b); });
  return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function b64urlDecode(text) {
  const padded = text.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((text.length + 3) % 4);
  return decodeURIComponent(Array.from(atob(padded), (c) => "%" + c.charCodeAt(0).toString(16).padStart(2, "0")).join(""));
}

function randomString() {
  return b64url(crypto.getRandomValues(new Uint8Array(32)));
}

async function discovery() {
  const response = await fetch(config.oidc.issuer + "/.well-known/openid-configuration", { credentials: "omit" });
  if (!response.ok) throw new Error("the identity provider's discovery document did not load");
  const document = await response.json();
  // OIDC Discovery 4.3: the document must name exactly the issuer it was fetched for.
  if (document.issuer !== config.oidc.issuer) throw new Error("the discovery document names another issuer");
  return document;
}

function redirectUri() {
  return window.location.origin + "/console";
}

// Starts a sign-in: the browser leaves for the identity provider and comes back to /console.
// `stepUp` carries the API's acr_values/max_age; `retry` is the request to resend once after;
// `silent` asks the provider not to show anything (`prompt=none`): it answers at once from
// its own session, or says that a sign-in is needed.
export async function signIn(stepUp, retry, silent) {
  const provider = await discovery();
  if (silent) sessionStorage.setItem(SILENT_KEY, String(Date.now()));
  else sessionStorage.removeItem(OUT_KEY);
  const verifier = randomString();
  const challenge = b64url(new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier))));
  const pending = {
    state: randomString(), nonce: randomString(), verifier, back: window.location.hash || "#/queue",
    retry: retry || null, stepUp: Boolean(stepUp), silent: Boolean(silent),
  };
  sessionStorage.setItem(PENDING_KEY, JSON.stringify(pending));
  const url = new URL(provider.authorization_endpoint);
  const params = {
    response_type: "code", client_id: config.oidc.client_id, redirect_uri: redirectUri(),
    scope: config.oidc.scope, state: pending.state, nonce: pending.nonce,
    code_challenge: challenge, code_challenge_method: "S256",
  };
  if (config.oidc.resource) params.resource = config.oidc.resource;
  if (stepUp) {
    if (stepUp.max_age) params.max_age = stepUp.max_age;
    if (stepUp.acr_values) params.acr_values = stepUp.acr_values;
    // max_age alone lets a recent password-only session through: without an acr to ask for,
    // only a fresh sign-in can bring the second factor.
    else params.prompt = "login";
  }
  if (silent) params.prompt = "none";
  Object.entries(params).forEach(([k, v]) => url.searchParams.set(k, v));
  window.location.assign(url.toString());
}

// The identity provider's redirect back: check state, exchange the code with the PKCE
// verifier, check the ID token's issuer, audience and nonce, keep the access token.
// Returns {back, retry} or throws with a message for the operator; null when not a callback.
export async function finishSignIn() {
  const query = new URLSearchParams(window.location.search);
  if (!query.has("state")) return null;
  const pending = JSON.parse(sessionStorage.getItem(PENDING_KEY) || "null");
  sessionStorage.removeItem(PENDING_KEY);
  history.replaceState(null, "", "/console" + (pending ? pending.back : ""));
  if (!pending || query.get("state") !== pending.state) throw new Error("sign-in answer does not match a sign-in started here (state); sign in again");
  // A silent sign-in the provider could not do without the person (or does not do at all):
  // nothing failed, the console asks for a sign-in as it would have without trying.
  if (pending.silent && query.has("error")) return { back: pending.back, retry: null, silentFailed: query.get("error") };
  if (query.has("error")) throw new Error("the identity provider refused: " + query.get("error"));
  const provider = await discovery();
  const form = new URLSearchParams({
    grant_type: "authorization_code", code: query.get("code") || "", redirect_uri: redirectUri(),
    client_id: config.oidc.client_id, code_verifier: pending.verifier,
  });
  if (config.oidc.resource) form.set("resource", config.oidc.resource);
  const response = await fetch(provider.token_endpoint, { method: "POST", body: form, credentials: "omit" });
  const tokens = await response.json();
  if (!response.ok || !tokens.access_token) throw new Error("the code exchange failed: " + (tokens.error || response.status));
  // The ID token came straight from the token endpoint over TLS (OIDC Core 3.1.3.7): its
  // claims are checked; the API verifies the access token's signature on every request.
  const idToken = JSON.parse(b64urlDecode((tokens.id_token || "..").split(".")[1] || "e30"));
  const audience = [].concat(idToken.aud || []);
  if (idToken.iss !== config.oidc.issuer || !audience.includes(config.oidc.client_id)) throw new Error("the ID token is for another issuer or client");
  if (idToken.nonce !== pending.nonce) throw new Error("the ID token's nonce does not match this sign-in");
  setToken(tokens.access_token);
  return { back: pending.back, retry: pending.retry, stepUp: pending.stepUp, silent: pending.silent };
}

// A link may carry a token in its fragment (`#token=…`, as `resolver demo --live` prints):
// browsers never send the fragment to a server, and it leaves the address bar and history
// before anything else runs.
export function takeTokenFromFragment() {
  const match = /^#token=([A-Za-z0-9._-]+)$/.exec(window.location.hash);
  if (!match) return;
  setToken(match[1]);
  history.replaceState(null, "", window.location.pathname + window.location.search);
}
