// The box authenticates as GitHub does: a JWT the app signed for /app, a token it minted for the rest.
import { createSign, generateKeyPairSync } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { closeHarnesses, Harness } from './harness.js';

afterEach(closeHarnesses);

function jwt(key: string, claims: Record<string, unknown>): string {
  const part = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const unsigned = `${part({ alg: 'RS256', typ: 'JWT' })}.${part(claims)}`;
  return `${unsigned}.${createSign('RSA-SHA256').update(unsigned).sign(key, 'base64url')}`;
}

describe('app authentication in the box', () => {
  it('trades a JWT the app signed for an installation token, and refuses any other credential', async () => {
    const h = await new Harness().startGitHub();
    const { auth } = h.box;
    const installation = auth.installations[0]?.id;
    const now = Math.floor(Date.now() / 1000);
    const ask = (authorization?: string, path = `/app/installations/${installation}/access_tokens`) =>
      fetch(`${h.box.apiUrl}${path}`, {
        method: path.startsWith('/app/') ? 'POST' : 'GET',
        headers: authorization ? { authorization } : {},
      });

    const good = jwt(auth.privateKey, { iss: auth.appId, iat: now - 30, exp: now + 540 });
    const res = await ask(`bearer ${good}`);
    expect(res.status).toBe(201);
    const { token } = (await res.json()) as { token: string };
    expect(token).toMatch(/^ghs_[A-Za-z0-9_-]{36}$/);
    expect((await ask(`token ${token}`, `/repos/${h.gh.owner}/${h.gh.repo}`)).status).toBe(200);

    const stranger = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({
      type: 'pkcs1',
      format: 'pem',
    }) as string;
    const refused = [
      await ask(),
      await ask(`bearer ${jwt(stranger, { iss: auth.appId, iat: now - 30, exp: now + 540 })}`),
      await ask(`bearer ${jwt(auth.privateKey, { iss: 1, iat: now - 30, exp: now + 540 })}`),
      await ask(`bearer ${jwt(auth.privateKey, { iss: auth.appId, iat: now - 700, exp: now - 60 })}`),
      await ask(`bearer ${jwt(auth.privateKey, { iss: auth.appId, iat: now, exp: now + 3600 })}`),
      await ask(`token ${token}`), // a token is not a JWT
      await ask('token ghs_made_up', `/repos/${h.gh.owner}/${h.gh.repo}`),
      await ask(`bearer ${good}`, `/repos/${h.gh.owner}/${h.gh.repo}`), // a JWT is not a token
    ];
    expect(refused.map((r) => r.status)).toEqual([401, 401, 401, 401, 401, 401, 401, 401]);
    expect(auth.refusals).toEqual([
      'no JWT',
      'JWT signature does not verify',
      'JWT iss 1',
      'JWT not valid now',
      'JWT lasts too long',
      'no JWT',
      'unknown token in "token ghs_ma..."',
      expect.stringMatching(/^unknown token in "bearer /),
    ]);
  });
});
