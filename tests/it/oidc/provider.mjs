// The authorization server of the OIDC tests (tests/it/oidc/): panva's oidc-provider (OpenID
// Certified), on loopback, with the `clientCredentials` and `resourceIndicators` features, so
// a client with an id and a secret gets a JWT access token minted for toold's resource.
//
//   node provider.mjs STATE_DIR RESOURCE [PORT]
//
// Prints `issuer http://127.0.0.1:PORT` once listening. The signing keys live in
// STATE_DIR/keys.json (made on first start, read again on a restart, so a provider stopped and
// started again on the same PORT is the same issuer). Besides the provider's own routes, the
// tests use three of this fixture's, on the same listener:
// - POST /test/sign {claims, header?, foreign?}: a JWT signed with the provider's current key
//   (the claims as given, so a test can make it expired, not yet valid, for another audience…),
//   or with `foreign: true` with a key the provider never published (same `kid`);
// - GET /test/public-pem: the current key's public key as PEM (for the HS256 confusion token);
// - POST /test/rotate: a new signing key (new `kid`) first in the set, the old one kept after.
// oidc-provider refuses an http issuer only with NODE_ENV=production (it warns otherwise).
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import crypto from 'node:crypto';
import Provider, { errors } from 'oidc-provider';
import * as jose from 'jose';

const [stateDir, resource, portArg] = process.argv.slice(2);
const keysFile = path.join(stateDir, 'keys.json');

// The clients: each with the scopes it may ask for and the roles claim its tokens carry.
const CLIENTS = {
  'mcp-sdk': { scope: 'toold.read toold.execute toold.admin', roles: ['toold-agent'] },
  'agent-a': { scope: 'toold.execute', roles: [] },
  'agent-b': { scope: 'toold.execute', roles: [] },
  observer: { scope: 'toold.read', roles: [] },
  admin: { scope: 'toold.admin', roles: [] },
  'no-role': { scope: 'profile', roles: [] },
};
const SECRET = (id) => `secret-of-${id}`;

function newKey() {
  const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = privateKey.export({ format: 'jwk' });
  return { ...jwk, kid: crypto.randomUUID(), alg: 'RS256', use: 'sig' };
}

function loadKeys() {
  if (fs.existsSync(keysFile)) return JSON.parse(fs.readFileSync(keysFile, 'utf8'));
  const keys = [newKey()];
  fs.writeFileSync(keysFile, JSON.stringify(keys));
  return keys;
}

function makeProvider(issuer, keys) {
  const provider = new Provider(issuer, {
    clients: Object.entries(CLIENTS).map(([id, client]) => ({
      client_id: id,
      client_secret: SECRET(id),
      grant_types: ['client_credentials'],
      redirect_uris: [],
      response_types: [],
      scope: client.scope,
    })),
    jwks: { keys },
    scopes: ['toold.read', 'toold.execute', 'toold.admin', 'profile'],
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => resource,
        useGrantedResource: () => true,
        getResourceServerInfo: (ctx, indicator) => {
          if (indicator !== resource) throw new errors.InvalidTarget(`unknown resource ${indicator}`);
          return {
            scope: 'toold.read toold.execute toold.admin profile',
            audience: resource,
            accessTokenTTL: 600,
            accessTokenFormat: 'jwt',
            jwt: { sign: { alg: 'RS256' } },
          };
        },
      },
    },
    extraTokenClaims: (ctx, token) => {
      const roles = CLIENTS[token.clientId]?.roles ?? [];
      return roles.length ? { roles } : undefined;
    },
  });
  provider.proxy = false;
  return provider;
}

async function sign(body, keys) {
  const header = { alg: 'RS256', typ: 'at+jwt', kid: keys[0].kid, ...(body.header ?? {}) };
  const key = body.foreign
    ? crypto.generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey
    : crypto.createPrivateKey({ key: keys[0], format: 'jwk' });
  return new jose.SignJWT(body.claims).setProtectedHeader(header).sign(key);
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    let text = '';
    req.on('data', (chunk) => { text += chunk; });
    req.on('end', () => resolve(text ? JSON.parse(text) : {}));
    req.on('error', reject);
  });
}

let keys = loadKeys();
let handler = null;
const server = http.createServer(async (req, res) => {
  try {
    if (req.url === '/test/sign' && req.method === 'POST') {
      const token = await sign(await readBody(req), keys);
      res.writeHead(200, { 'content-type': 'text/plain' }).end(token);
    } else if (req.url === '/test/public-pem') {
      const pem = crypto.createPublicKey({ key: keys[0], format: 'jwk' }).export({ type: 'spki', format: 'pem' });
      res.writeHead(200, { 'content-type': 'text/plain' }).end(pem);
    } else if (req.url === '/test/rotate' && req.method === 'POST') {
      keys = [newKey(), ...keys];
      fs.writeFileSync(keysFile, JSON.stringify(keys));
      handler = makeProvider(issuer, keys).callback();
      res.writeHead(200, { 'content-type': 'text/plain' }).end(keys[0].kid);
    } else {
      handler(req, res);
    }
  } catch (err) {
    res.writeHead(500, { 'content-type': 'text/plain' }).end(String(err));
  }
});
let issuer = null;
server.listen(Number(portArg ?? 0), '127.0.0.1', () => {
  issuer = `http://127.0.0.1:${server.address().port}`;
  handler = makeProvider(issuer, keys).callback();
  console.log(`issuer ${issuer}`);
});
