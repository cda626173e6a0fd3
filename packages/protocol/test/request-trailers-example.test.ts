import { describe, expect, it } from 'vitest';
import { decodeRequestHead, encodeFrame, encodeRequestHead, FrameFlags, FrameType } from '../src/index.js';
import { hex } from './support/bytes.js';

// The request-trailer example of PROTOCOL.md ("HTTP/2 and gRPC"). The codec needed nothing new for HTTP/2:
// request trailers are a second request head, so this only pins the bytes the document shows.
const LIMIT = 64 * 1024;

describe('the PROTOCOL.md request-trailer example', () => {
  it('edge HEADERS after the body, END_STREAM: method and target repeated, then the trailer fields', () => {
    const trailers = encodeRequestHead(
      { method: 'POST', target: '/upload', headers: ['x-checksum', '7f3a'] },
      LIMIT,
    );
    const frame = encodeFrame(FrameType.HEADERS, FrameFlags.END_STREAM, 3, trailers);
    expect(frame).toEqual(
      hex(`000022 01 01 00000003
           04 504f5354
           0007 2f75706c6f6164
           0001
           000a 782d636865636b73756d  0004 37663361`),
    );
    expect(decodeRequestHead(trailers).headers).toEqual(['x-checksum', '7f3a']);
  });
});
