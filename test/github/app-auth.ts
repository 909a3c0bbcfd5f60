// GitHub App authentication as GitHub does it, for the fake: the app signs a JWT (RS256, `iss` =
// the app id, at most 10 minutes long) with its private key and trades it for an installation
// token; every other call carries a token, which must be one this fake minted and not expired.
import { createPrivateKey, createPublicKey, generateKeyPairSync, randomBytes, verify } from 'node:crypto';

export interface Installation {
  id: number;
  account: string;
  suspended?: boolean;
}

export interface Token {
  /** null: a token not tied to an installation (a job's GITHUB_TOKEN, a static test token). */
  installation: number | null;
  expiresAt: number;
  /** What the token may do with git over HTTP. */
  push: boolean;
}

/** A JWT the app may send for at most this long (GitHub: 10 minutes), plus clock drift. */
const MAX_JWT_SECONDS = 600 + 60;
const TOKEN_SECONDS = 3600;

/** Apps made so far: each gets its own app and installation ids (Octokit caches tokens by installation). */
let made = 0;

/**
 * The apps' private key, made once per process (or once per run, by a global setup that passes it
 * in FORKFLUSH_TEST_APP_KEY: test/app-key.ts): an RSA key costs a tenth of a second or more, and
 * a chaos worker makes a box for each of its 50 runs. Each app still has its own id, the JWT's
 * `iss`, so a box refuses another app's JWT (app-auth.test.ts signs with a stranger's key too).
 */
let sharedKey: string | undefined;
const appKey = () =>
  (sharedKey ??=
    process.env.FORKFLUSH_TEST_APP_KEY ??
    generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs1', format: 'pem' }).toString());

export class AppAuth {
  readonly appId = 424242 + made;
  readonly privateKey: string;
  private readonly publicKey;
  readonly installations: Installation[] = [{ id: 1000 + made++, account: 'octo-org' }];
  private readonly tokens = new Map<string, Token>();
  /** Why the last credential was refused (for the test's failure message). */
  readonly refusals: string[] = [];

  constructor() {
    this.privateKey = appKey();
    this.publicKey = createPublicKey(createPrivateKey(this.privateKey));
  }

  /** A token for a job or a test: ghs_ and 36 characters, like GitHub's. */
  mint(installation: number | null, push = true, seconds = TOKEN_SECONDS): { token: string; expiresAt: number } {
    const token = `ghs_${randomBytes(27).toString('base64url').slice(0, 36)}`;
    const expiresAt = Date.now() + seconds * 1000;
    this.tokens.set(token, { installation, expiresAt, push });
    return { token, expiresAt };
  }

  /** Accepts a fixed token too (tests that make their own Octokit). */
  allow(token: string, push = true): void {
    this.tokens.set(token, { installation: null, expiresAt: Number.POSITIVE_INFINITY, push });
  }

  /** Every token this fake has minted or allowed. */
  issued(): string[] {
    return [...this.tokens.keys()];
  }

  revoke(token: string): void {
    this.tokens.delete(token);
  }

  /** The token an Authorization header carries (`token X`, `bearer X`, or git's basic x-access-token:X). */
  token(header: string | undefined): Token | null {
    const value = credential(header);
    const found = value === null ? undefined : this.tokens.get(value);
    if (!found) return this.refuse(`unknown token in "${redact(header)}"`);
    if (found.expiresAt < Date.now()) return this.refuse('expired token');
    return found;
  }

  /** True if the header carries a JWT this app signed that is valid now. */
  jwt(header: string | undefined): boolean {
    const parts = /^bearer\s+(\S+)$/i.exec(header ?? '')?.[1]?.split('.');
    if (parts?.length !== 3) return this.deny('no JWT');
    const [head, body, signature] = parts as [string, string, string];
    const alg = JSON.parse(Buffer.from(head, 'base64url').toString()).alg;
    if (alg !== 'RS256') return this.deny(`JWT alg ${alg}, not RS256`);
    const signed = Buffer.from(`${head}.${body}`);
    if (!verify('RSA-SHA256', signed, this.publicKey, Buffer.from(signature, 'base64url'))) {
      return this.deny('JWT signature does not verify');
    }
    const claims = JSON.parse(Buffer.from(body, 'base64url').toString());
    const now = Date.now() / 1000;
    if (String(claims.iss) !== String(this.appId)) return this.deny(`JWT iss ${claims.iss}`);
    if (!(claims.iat <= now + 60 && claims.exp > now)) return this.deny('JWT not valid now');
    if (claims.exp - claims.iat > MAX_JWT_SECONDS) return this.deny('JWT lasts too long');
    return true;
  }

  private deny(why: string): false {
    this.refusals.push(why);
    return false;
  }

  private refuse(why: string): null {
    this.refusals.push(why);
    return null;
  }
}

function credential(header: string | undefined): string | null {
  const m = /^(token|bearer|basic)\s+(\S+)$/i.exec(header ?? '');
  if (!m) return null;
  if (m[1]?.toLowerCase() !== 'basic') return m[2] as string;
  const decoded = Buffer.from(m[2] as string, 'base64').toString();
  return decoded.slice(decoded.indexOf(':') + 1) || null;
}

function redact(header: string | undefined): string {
  return header ? `${header.slice(0, 12)}...` : '(none)';
}
