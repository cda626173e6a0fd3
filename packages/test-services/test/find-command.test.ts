import { describe, expect, it } from 'vitest';
import { findCommand, ServiceErrorCode } from '../src/index.js';

describe('findCommand', () => {
  it('finds a command on PATH, and in /usr/sbin and /usr/bin when PATH leaves them out', () => {
    expect(findCommand('sh', 'dash')).toMatch(/\/sh$/);
    expect(findCommand('sh', 'dash', '/nowhere')).toMatch(/^\/usr\/s?bin\/sh$/);
  });

  it('names the Debian package to install when the command is missing', () => {
    let caught: unknown;
    try {
      findCommand('tunnel2-no-such-command', 'tunnel2-no-such-package');
    } catch (err) {
      caught = err;
    }
    expect(caught).toMatchObject({
      code: ServiceErrorCode.NOT_INSTALLED,
      message: expect.stringContaining('apt-get install -y tunnel2-no-such-package'),
    });
  });
});
