// Test rig only: a real OpenID Provider (node-oidc-provider) for the console's browser tests.
//
// Usage: node op.mjs <redirect_uri> <audience>. Listens on a free loopback port and prints one
// JSON line {"issuer": ...} when it answers. Users (password "correct horse" for all):
//   alice, bob: a second factor is enrolled (one-time code 123456): amr ["pwd", "otp", "mfa"]
//   carol:      password only: amr ["pwd"]
// A sign-in without the code is a password-only sign-in (amr ["pwd"]), whoever the user is.
// Access tokens are JWTs for the resolver API's audience carrying auth_time, amr and acr.
import { generateKeyPairSync } from 'node:crypto';
import { createServer } from 'node:http';

import Provider, { interactionPolicy } from 'oidc-provider';

const [redirectUri, audience] = process.argv.slice(2);
const RESOURCE = 'urn:resolver:api';
const PASSWORD = 'correct horse';
const OTP = '123456';
const SECOND_FACTOR = new Set(['alice', 'bob']);
// The resolver API's step-up names acr_values="mfa" (RFC 9470).
const ACR_PWD = 'pwd';
const ACR_MFA = 'mfa';

function signingKey() {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { ...privateKey.export({ format: 'jwk' }), kid: 'op-1', alg: 'RS256', use: 'sig' };
}

// acr_values is only a voluntary request in OIDC Core: this provider treats an unmet one as a
// reason to authenticate again (what a step-up asks for), once per request.
function loginPolicy() {
  const { Check, base } = interactionPolicy;
  const policy = base();
  policy.get('login').checks.add(new Check('acr_unmet', 'a stronger authentication is requested', (ctx) => {
    const wanted = (ctx.oidc.params.acr_values || '').split(' ').filter(Boolean);
    if (wanted.length === 0 || ctx.oidc.result?.login) return Check.NO_NEED_TO_PROMPT;
    return wanted.includes(ctx.oidc.session.acr) ? Check.NO_NEED_TO_PROMPT : Check.REQUEST_PROMPT;
  }));
  return policy;
}

function configuration() {
  return {
    clients: [{
      client_id: 'resolver-console',
      token_endpoint_auth_method: 'none',
      application_type: 'web',
      redirect_uris: [redirectUri],
      grant_types: ['authorization_code'],
      response_types: ['code'],
    }],
    jwks: { keys: [signingKey()] },
    cookies: { keys: ['test-rig-only'] },
    acrValues: [ACR_PWD, ACR_MFA],
    claims: { openid: ['sub'] },
    features: {
      devInteractions: { enabled: false },
      userinfo: { enabled: false },
      resourceIndicators: {
        enabled: true,
        defaultResource: async () => RESOURCE,
        useGrantedResource: async () => true,
        getResourceServerInfo: async (ctx, indicator) => {
          if (indicator !== RESOURCE) throw new Error(`unknown resource ${indicator}`);
          return { scope: 'recover', audience, accessTokenFormat: 'jwt', accessTokenTTL: 600 };
        },
      },
    },
    // RFC 9068 lets a JWT access token carry how the user authenticated; the API needs it.
    extraTokenClaims: async (ctx) => {
      const code = ctx.oidc.entities.AuthorizationCode;
      return code ? { auth_time: code.authTime, amr: code.amr, acr: code.acr } : undefined;
    },
    findAccount: async (ctx, sub) => ({ accountId: sub, claims: async () => ({ sub }) }),
    interactions: { policy: loginPolicy(), url: (ctx, interaction) => `/interaction/${interaction.uid}` },
    ttl: { Session: 3600, Interaction: 600, Grant: 3600, AuthorizationCode: 60, IdToken: 600 },
  };
}

function loginPage(uid, stepUp, error) {
  const note = stepUp ? '<p id="step-up">The application asks for your second factor.</p>' : '';
  const problem = error ? '<p id="error" role="alert">Wrong user name, password or code.</p>' : '';
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Sign in</title></head>
<body><main><h1>Test identity provider</h1>${note}${problem}
<form method="post" action="/interaction/${uid}">
<label for="login">User name</label> <input id="login" name="login" autocomplete="username" required>
<label for="password">Password</label> <input id="password" name="password" type="password" required>
<label for="otp">One-time code (if you have a second factor)</label> <input id="otp" name="otp" inputmode="numeric">
<button type="submit">Sign in</button></form></main></body></html>`;
}

async function readForm(req) {
  let body = '';
  for await (const chunk of req) body += chunk;
  return new URLSearchParams(body);
}

function authenticate(form) {
  const login = form.get('login') || '';
  if (!['alice', 'bob', 'carol'].includes(login) || form.get('password') !== PASSWORD) return null;
  const otp = form.get('otp') || '';
  if (otp && !(SECOND_FACTOR.has(login) && otp === OTP)) return null;
  const strong = otp !== '';
  return {
    accountId: login,
    amr: strong ? ['pwd', 'otp', 'mfa'] : ['pwd'],
    acr: strong ? ACR_MFA : ACR_PWD,
  };
}

async function interaction(provider, req, res) {
  const details = await provider.interactionDetails(req, res);
  if (details.prompt.name === 'consent') {
    // A first-party console: consent is implied, the grant gets what was asked.
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: details.session.accountId, clientId: details.params.client_id });
    const missing = details.prompt.details;
    if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
    for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes || {})) {
      grant.addResourceScope(indicator, scopes.join(' '));
    }
    const grantId = await grant.save();
    await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
    return;
  }
  const stepUp = Boolean(details.params.acr_values || details.params.max_age !== undefined);
  if (req.method === 'POST') {
    const login = authenticate(await readForm(req));
    if (login) {
      await provider.interactionFinished(req, res, { login }, { mergeWithLastSubmission: false });
      return;
    }
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(loginPage(details.uid, stepUp, true));
    return;
  }
  res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(loginPage(details.uid, stepUp, false));
}

const server = createServer();
server.listen(0, '127.0.0.1', () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const provider = new Provider(issuer, configuration());
  const handle = provider.callback();
  server.on('request', (req, res) => {
    if (req.url.startsWith('/interaction/')) {
      interaction(provider, req, res).catch((err) => {
        res.writeHead(400, { 'content-type': 'text/plain' }).end(String(err));
      });
      return;
    }
    handle(req, res);
  });
  process.stdout.write(`${JSON.stringify({ issuer, jwks_uri: `${issuer}/jwks` })}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
