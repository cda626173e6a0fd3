import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { quoteForEcho } from '../answers/echo.js';
import { sendEdgeError } from '../answers/error-response.js';
import { EdgeErrorCode } from '../errors.js';

/**
 * Fastify answers a few requests to the edge's own host itself, before a route runs: a URL it cannot
 * decode (`/%zz`), a body its parser refuses. Left to it, those answers are Fastify's JSON, without the
 * stable code, `nosniff` or the page a browser gets for every other edge answer (docs/error-pages.md).
 */

/** Fastify's `frameworkErrors`: a URL it cannot decode is the edge's 400; anything else keeps its answer. */
export function answerFrameworkError(
  error: FastifyError,
  request: FastifyRequest,
  reply: FastifyReply,
): void {
  if (error.code !== 'FST_ERR_BAD_URL') {
    void reply.send(error);
    return;
  }
  reply.hijack();
  sendEdgeError(
    reply.raw,
    EdgeErrorCode.BAD_REQUEST,
    `malformed request: ${quoteForEcho(request.raw.url ?? '/')} is not a valid URL`,
  );
}

/**
 * The content-type parser of every body on the edge's own routes: none is read. They need none (the
 * takeover notice is all in its URL and headers; tunnelled bodies never pass through Fastify), and a body
 * sent to a URL that is no tunnel must get the 404 every such URL gets, not a parser's 400 or 415. What
 * is left unread is discarded with the request.
 */
export function ignoreBody(
  _request: FastifyRequest,
  _payload: unknown,
  done: (err: Error | null, body?: unknown) => void,
): void {
  done(null, undefined);
}
