// The hooks of a test file that runs the app against GitHub in a box: only 127.0.0.1 is reachable
// (nock refuses the rest), and after each test the harnesses are closed and any exchange that broke
// GitHub's OpenAPI description fails the test.
import nock from 'nock';
import { afterEach, beforeEach } from 'vitest';
import { assertNoOpenApiViolations } from './fake-github.js';
import { closeHarnesses } from './harness.js';

export function useGitHubInABox(): void {
  beforeEach(() => {
    nock.disableNetConnect();
    nock.enableNetConnect('127.0.0.1');
  });
  afterEach(async () => {
    await closeHarnesses();
    assertNoOpenApiViolations();
    nock.cleanAll();
    nock.enableNetConnect();
  });
}
