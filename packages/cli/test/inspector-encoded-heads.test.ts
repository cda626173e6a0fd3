import { createCapture, EntryStore, toEntry, toHar } from '@tunnel2/inspector';
import { encodeRequestHead, encodeResponseHead } from '@tunnel2/protocol';
import { describe, expect, it } from 'vitest';

// The agent hands the inspector its heads as the encoded frame payloads (decoded only when read), a test or a
// replay hands it flat lists: both must show the same entry.
const requestHeaders = [
  'Host',
  'a.example',
  'X-Forwarded-For',
  '203.0.113.9',
  'Set-Cookie',
  'a=1',
  'Set-Cookie',
  'b=2',
];
const responseHeaders = ['content-type', 'application/json', 'x-tunnel2-error', 'backend_refused'];

function record(encoded: boolean) {
  const store = new EntryStore();
  const request = encodeRequestHead(
    { method: 'POST', target: '/hook?x=1', headers: requestHeaders },
    1 << 16,
  );
  // A frame's payload is a view into a larger received message; the message may be released or reused.
  const message = Buffer.concat([Buffer.from('xx'), request, Buffer.from('yy')]);
  const payload = message.subarray(2, 2 + request.length);
  const recorder = createCapture(store, 1024).begin({
    method: 'POST',
    target: '/hook?x=1',
    headers: requestHeaders,
    ...(encoded ? { encodedHead: payload } : {}),
  })!;
  message.fill(0);
  recorder.requestData(Buffer.from('{"a":1}'));
  const head = encodeResponseHead({ status: 502, statusMessage: '', headers: responseHeaders }, 1 << 16);
  if (encoded) {
    recorder.responseHead(502, responseHeaders, head);
  } else {
    recorder.responseHead(502, responseHeaders);
  }
  recorder.responseData(Buffer.from('bad gateway\n'));
  return store.get(recorder.finish()!)!;
}

describe('inspector entries from encoded heads', () => {
  it('show the same headers, error, bodies and HAR as entries from flat lists', () => {
    const fromLists = record(false);
    const fromBytes = record(true);
    expect(fromBytes.requestHeaders).toEqual(requestHeaders);
    expect(fromBytes.responseHeaders).toEqual(responseHeaders);
    expect(fromBytes.error).toEqual({ code: 'backend_refused', message: 'answered with backend_refused' });
    const strip = (e: ReturnType<typeof toEntry>) => ({ ...e, durationMs: 0, ttfbMs: 0, startedAt: '' });
    expect(strip(toEntry(fromBytes))).toEqual(strip(toEntry(fromLists)));
    type Har = { log: { entries: { request: { headers: unknown }; response: { headers: unknown } }[] } };
    const har = (e: typeof fromLists) => {
      const first = (toHar([e], { redact: false, baseUrl: 'https://a.example', version: 'test' }) as Har).log
        .entries[0]!;
      return [first.request.headers, first.response.headers];
    };
    expect(har(fromBytes)).toEqual(har(fromLists));
  });
});
