import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { BenchError, BenchErrorCode } from '../errors.js';
import type { SideName } from '../plan/report-schema.js';
import { type RequestShape, statusMatcher } from '../plan/request-shape.js';
import type { LoadTarget } from '../stacks/bench-stack.js';

/** One side as the preflight checks it: where to connect, and the URL to name in a message. */
export interface PreflightSide {
  side: SideName;
  target: LoadTarget;
  /** The URL the user knows this side by (their --target, --tunnel-url, or the kit's tunnel). */
  url: string;
  /** The --target the kit's own agent forwards this side to, when the kit started that agent. */
  agentTarget?: string;
}

/** One preflight answer: its status, and tunnel2's own error code and text when tunnel2 answered itself. */
interface Answer {
  status: number;
  tunnelError: { code: string; text: string } | undefined;
}

/** tunnel2's own error answers are one short line; more than this is not read. */
const MAX_ERROR_TEXT = 512;

function fail(message: string, cause?: unknown): BenchError {
  return new BenchError(BenchErrorCode.PREFLIGHT, message, { cause });
}

function errorCode(err: unknown): string {
  const code =
    typeof err === 'object' && err !== null && 'code' in err ? (err as { code: unknown }).code : '';
  return typeof code === 'string' && code !== '' ? code : 'error';
}

/** Sends one request of the run's shape and resolves with its status; the body is read and dropped. */
function once(target: LoadTarget, shape: RequestShape, path: string, timeoutMs: number): Promise<Answer> {
  const url = new URL(path, target.origin);
  const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = send(url, {
      method: shape.method,
      headers: { ...shape.headers, host: target.host },
      // The preflight checks the service, not a certificate the load generator would not check either.
      rejectUnauthorized: false,
      servername: target.host.replace(/:\d+$/, ''),
      timeout: timeoutMs,
    });
    req.once('timeout', () => req.destroy(Object.assign(new Error('timeout'), { code: 'ETIMEDOUT' })));
    req.once('error', reject);
    req.once('response', (res: IncomingMessage) => {
      const status = res.statusCode ?? 0;
      const code = res.headers['x-tunnel2-error'];
      if (typeof code !== 'string') {
        res.resume();
        res.once('end', () => resolve({ status, tunnelError: undefined }));
        res.once('error', reject);
        return;
      }
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        if (text.length < MAX_ERROR_TEXT) text += chunk.slice(0, MAX_ERROR_TEXT - text.length);
      });
      res.once('end', () =>
        resolve({ status, tunnelError: { code, text: text.trim().split('\n')[0] ?? '' } }),
      );
      res.once('error', reject);
    });
    req.end(shape.body ?? undefined);
  });
}

/**
 * One request per path to a side before any load: a wrong URL, a service that is down or an endpoint
 * that answers 401/404 is said once, clearly, instead of as a run full of errors.
 */
export async function preflight(side: PreflightSide, shape: RequestShape, timeoutSec: number): Promise<void> {
  const expected = statusMatcher(shape.expectStatus);
  for (const path of shape.paths) {
    const shown = new URL(path, side.url).href;
    let answer: Answer;
    try {
      answer = await once(side.target, shape, path, timeoutSec * 1000);
    } catch (err) {
      const code = errorCode(err);
      if (code === 'ETIMEDOUT') {
        throw fail(
          `the ${side.side} side did not answer ${shape.method} ${shown} within ${timeoutSec} s`,
          err,
        );
      }
      throw fail(
        `the ${side.side} side is unreachable: ${shape.method} ${shown} failed (${code}); ` +
          'is the service running and listening at that address?',
        err,
      );
    }
    const { status, tunnelError } = answer;
    if (expected(status)) continue;
    const what = `${shape.method} ${shown} answered ${status} on the ${side.side} side, expected ${shape.expectStatus.join(', ')}`;
    if (tunnelError === undefined) {
      throw fail(
        `${what}; if ${status} is the right answer for this endpoint, pass --expect-status ${status}`,
      );
    }
    // tunnel2 answered, not the service: its code says why, and expecting that status would measure nothing.
    const why = `(${tunnelError.code}${tunnelError.text === '' ? '' : `: ${tunnelError.text}`})`;
    throw fail(
      side.agentTarget === undefined
        ? `${what}: tunnel2 answered itself, not the service ${why}`
        : `${what}: the kit's agent could not reach --target ${new URL(path, side.agentTarget).href} ${why}`,
    );
  }
}
