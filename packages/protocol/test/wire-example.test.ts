import { describe, expect, it } from 'vitest';
import {
  defaultSettings,
  encodeFrame,
  encodeHello,
  encodeRequestHead,
  encodeResponseHead,
  FrameFlags,
  FrameType,
} from '../src/index.js';
import { hex } from './support/bytes.js';

// The worked example of PROTOCOL.md ("A GET, byte by byte"). Keep the two in step.
const LIMIT = 64 * 1024;

describe('the PROTOCOL.md worked example', () => {
  it('agent HELLO', () => {
    expect(
      encodeHello({ minVersion: 1, maxVersion: 1, settings: { ...defaultSettings }, meta: {} }, false),
    ).toEqual(
      hex(`000026 06 00 00000000
           0001 0001 0005
           0001 000003e8  0002 00010000  0003 00040000  0004 01000000  0005 00002710
           7b7d`),
    );
  });

  it('edge HELLO ACK', () => {
    const meta = { session: 'demo' };
    expect(
      encodeHello({ minVersion: 1, maxVersion: 1, settings: { ...defaultSettings }, meta }, true),
    ).toEqual(
      hex(`000036 06 01 00000000
           0001 0001 0005
           0001 000003e8  0002 00010000  0003 00040000  0004 01000000  0005 00002710
           7b2273657373696f6e223a2264656d6f227d`),
    );
  });

  it('edge HEADERS: the request, END_STREAM (no body)', () => {
    const head = encodeRequestHead(
      { method: 'GET', target: '/hi?x=%C3%A9', headers: ['Host', 'demo.example', 'Accept', '*/*'] },
      LIMIT,
    );
    expect(encodeFrame(FrameType.HEADERS, FrameFlags.END_STREAM, 1, head)).toEqual(
      hex(`000035 01 01 00000001
           03 474554
           000c 2f68693f783d254333254139
           0002
           0004 486f7374  000c 64656d6f2e6578616d706c65
           0006 416363657074  0003 2a2f2a`),
    );
  });

  it('agent HEADERS, DATA, DATA END_STREAM: the response, in one message', () => {
    const head = encodeResponseHead(
      { status: 200, statusMessage: 'OK', headers: ['Content-Length', '5'] },
      LIMIT,
    );
    const message = Buffer.concat([
      encodeFrame(FrameType.HEADERS, 0, 1, head),
      encodeFrame(FrameType.DATA, 0, 1, Buffer.from('hello')),
      encodeFrame(FrameType.DATA, FrameFlags.END_STREAM, 1),
    ]);
    expect(message).toEqual(
      hex(`00001a 01 00 00000001
           00c8 02 4f4b 0001 000e 436f6e74656e742d4c656e677468 0001 35
           000005 00 00 00000001 68656c6c6f
           000000 00 01 00000001`),
    );
  });
});
