import {
  askOfFields,
  type ErrorAsk,
  type ErrorFacts,
  errorBody,
  negotiateErrorFormat,
} from '@tunnel2/edge/error-page';
import type { RawHeaders } from '@tunnel2/protocol';
import type { BackendErrorAnswer, BackendErrorCode } from './backend-error-answer.js';
import type { Target } from './target.js';

/**
 * The agent's backend errors in the form the public client asked for. The agent renders them, not the
 * edge: it alone knows the local server it forwards to (`localhost:3000`) and what went wrong there, and
 * the request's Accept travels to it in the head. The template is the edge's (`@tunnel2/edge/error-page`,
 * a module that loads nothing else of the edge), so the pages look the same whoever writes them.
 */

/** What the page says for each backend code: a title and what to do, given the local server's label. */
const explanations: Readonly<Record<BackendErrorCode, { title: string; hint: (target: string) => string }>> =
  {
    TUNNEL2_ERR_BACKEND_UNREACHABLE: {
      title: 'Local server unreachable',
      hint: (target) =>
        `The tunnel works, but nothing answers on ${target}. Start your local server on ${target} (or restart \`tunnel2 http\` with the port your server listens on), then reload this page.`,
    },
    TUNNEL2_ERR_BACKEND_CLOSED: {
      title: 'Local server closed the connection',
      hint: (target) =>
        `Your local server on ${target} took the request and closed the connection without answering: look at its logs for a crash on this request.`,
    },
    TUNNEL2_ERR_BACKEND_TIMEOUT: {
      title: 'Local server timed out',
      hint: (target) =>
        `Your local server on ${target} did not answer in time: check that it is running and not stuck on this request.`,
    },
    TUNNEL2_ERR_BACKEND_INVALID_RESPONSE: {
      title: 'Invalid response from local server',
      hint: (target) =>
        `Your local server on ${target} answered with something that is not a valid HTTP response: look at what it sends for this request.`,
    },
    TUNNEL2_ERR_BACKEND_NOT_HTTP2: {
      title: 'gRPC needs an HTTP/2 local server',
      hint: (target) =>
        `The call was for gRPC, and ${target} is spoken to over HTTP/1.1. Run \`tunnel2 http\` with \`--h2c\` for a local server that speaks HTTP/2 (gRPC servers do).`,
    },
    TUNNEL2_ERR_TARGET_TLS: {
      title: 'TLS error with local server',
      hint: (target) =>
        `The HTTPS connection to ${target} failed. Run \`tunnel2 http\` with \`--insecure\` to accept its certificate, or \`--ca <file>\` to trust the CA that signed it.`,
    },
  };

/** The local server as a page names it: `localhost:3000`, or the origin of an https:// target. */
export function targetLabel(target: Target): string {
  return target.origin.startsWith('https:') ? target.origin : target.host;
}

/** The ask of a tunnelled request: its Accept (every field, joined), its method and its request id. */
export function askOfRequest(method: string, headers: RawHeaders): ErrorAsk {
  return askOfFields(method, headers);
}

/** The content type and body of a backend error for `ask` (the plain-text line when it asks for no other). */
export function backendErrorBody(
  answer: BackendErrorAnswer,
  target: Target,
  ask: ErrorAsk,
): { contentType: string; body: Buffer } {
  const label = targetLabel(target);
  const explanation = explanations[answer.code];
  const facts: ErrorFacts = {
    status: answer.status,
    title: explanation.title,
    code: answer.code,
    message: answer.message,
    where: 'backend',
    target: label,
    hint: explanation.hint(label),
    requestId: ask.requestId,
  };
  return errorBody(facts, negotiateErrorFormat(ask.accept));
}
