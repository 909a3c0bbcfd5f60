// What the pre-flight looks for from inside the sandbox: the program a command starts and the
// paths it names, an error for what it runs, a note for what it only names.
import { describe, expect, it } from 'vitest';
import { neededBy } from '../../src/local/sandbox-view.js';

describe('neededBy', () => {
  const PATH = process.env.PATH ?? '';

  it("takes the program, and tells a path the command runs (an interpreter's script) from one it only names", async () => {
    const needed = await neededBy('node /etc/hosts --data /etc/passwd', 'agent.command', PATH);
    expect(needed.map((n) => [n.name, n.program, n.runs])).toEqual([
      ['node', true, true],
      ['/etc/hosts', false, true],
      ['/etc/passwd', false, false],
    ]);
    expect(needed[0]?.outside).toMatch(/\/node$/);
    // Inside a shell command line too, after options.
    const inner = await neededBy("sh -c 'python3 -u /etc/hosts > /dev/null'", 'grader.command', PATH);
    expect(inner.find((n) => n.name === '/etc/hosts')?.runs).toBe(true);
    // /dev is never looked at; a path that is not there outside is the command's to make.
    expect((await neededBy('sh x.sh > /dev/null; cat /no/such/file', 'k', PATH)).map((n) => n.name)).toEqual(['sh']);
  });

  it('looks for no program a shell runs itself, nor a relative one (the workspace has it)', async () => {
    expect(await neededBy('cd sub && make', 'k', PATH)).toEqual([]);
    expect(await neededBy('./tools/agent --go', 'k', PATH)).toEqual([]);
    expect(await neededBy('FOO=1 no-such-program-anywhere', 'k', PATH)).toEqual([]);
  });
});
