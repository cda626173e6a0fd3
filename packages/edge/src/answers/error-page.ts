import type { ErrorFacts } from './error-facts.js';
import { type ErrorFormat, negotiateErrorFormat } from './error-format.js';
import { renderErrorHtml } from './error-html.js';

/**
 * The body of an error answer in the form the client asked for, the same for the edge's own answers and
 * the agent's backend errors (the agent imports this module alone, as `@tunnel2/edge/error-page`: it
 * loads nothing else of the edge). Plain text is the message line exactly as it always was.
 */

/** What a client's request says about the answer it can take. */
export interface ErrorAsk {
  accept: string | undefined;
  /** HEAD: the answer's headers, no body. */
  method: string | undefined;
  requestId?: string | undefined;
}

/**
 * The ask of a request whose head is known as raw fields (name, value, ...): a head carried on a node link
 * (cluster/link/link-request.ts) or to the agent (its backend errors). Every Accept field counts, joined as Node
 * joins them; the head is bounded by the edge's header limit, and so is this.
 */
export function askOfFields(
  method: string | undefined,
  fields: readonly string[],
): ErrorAsk & { host?: string | undefined } {
  const ask: ErrorAsk & { host?: string | undefined } = { accept: undefined, method };
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const name = fields[i]!.toLowerCase();
    const value = fields[i + 1]!;
    if (name === 'accept') ask.accept = ask.accept === undefined ? value : `${ask.accept}, ${value}`;
    else if (name === 'host') ask.host = value;
    // request-id.ts's REQUEST_ID_HEADER, not imported: this module loads nothing else of the edge.
    else if (name === 'x-request-id') ask.requestId = value;
  }
  return ask;
}

/**
 * Headers of every negotiated error answer, on top of `cache-control: no-store` and `nosniff`: the page
 * loads nothing and runs nothing, and a cache keeps the forms apart.
 */
export const ERROR_PAGE_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy':
    "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'",
  vary: 'Accept',
};

const CONTENT_TYPES: Readonly<Record<ErrorFormat, string>> = {
  text: 'text/plain; charset=utf-8',
  html: 'text/html; charset=utf-8',
  json: 'application/json; charset=utf-8',
};

/** The JSON form: `{"error":{"status","code","message","where","target"?,"hint","requestId"?}}`. */
function errorJson(facts: ErrorFacts): string {
  return `${JSON.stringify({
    error: {
      status: facts.status,
      code: facts.code,
      message: facts.message,
      where: facts.where,
      ...(facts.target === undefined ? {} : { target: facts.target }),
      hint: facts.hint.replaceAll('`', ''),
      ...(facts.requestId === undefined ? {} : { requestId: facts.requestId }),
    },
  })}\n`;
}

/** The content type and body of `facts` in `format`. */
export function errorBody(facts: ErrorFacts, format: ErrorFormat): { contentType: string; body: Buffer } {
  const text =
    format === 'html' ? renderErrorHtml(facts) : format === 'json' ? errorJson(facts) : `${facts.message}\n`;
  return { contentType: CONTENT_TYPES[format], body: Buffer.from(text, 'utf8') };
}

export type { ErrorFacts, ErrorWhere } from './error-facts.js';
export { escapeHtml } from './error-html.js';
export { type ErrorFormat, negotiateErrorFormat };
