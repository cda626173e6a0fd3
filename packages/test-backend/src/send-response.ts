import type { ServerResponse } from 'node:http';

export const JSON_TYPE = 'application/json';

/** A complete response from a body already in memory (pre-serialized where it can be). */
export function sendBuffer(res: ServerResponse, status: number, type: string, body: Buffer): void {
  res.writeHead(status, { 'content-type': type, 'content-length': body.length });
  res.end(body);
}

export function sendJson(res: ServerResponse, status: number, value: unknown): void {
  sendBuffer(res, status, JSON_TYPE, Buffer.from(JSON.stringify(value)));
}

export function sendBadRequest(res: ServerResponse, message: string): void {
  sendJson(res, 400, { error: message });
}

/**
 * A path or query integer in [0, max]: digits only (no sign, exponent, hex or blanks, which `Number()`
 * would accept), or undefined.
 */
export function parseCount(text: string | null | undefined, max: number): number | undefined {
  if (text === null || text === undefined || !/^\d{1,16}$/.test(text)) return undefined;
  const n = Number(text);
  return n <= max ? n : undefined;
}
