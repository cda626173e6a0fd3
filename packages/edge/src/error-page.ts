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
