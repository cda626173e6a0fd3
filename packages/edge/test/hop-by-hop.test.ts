import { withoutHopByHop } from '@tunnel2/protocol';
import { expect, it } from 'vitest';

it('drops RFC 9110 connection-specific fields and those named in Connection, keeping order and case', () => {
  const raw = [
    'Host',
    'a',
    'Connection',
    'close, X-Custom',
    'X-Custom',
    '1',
    'Keep-Alive',
    't',
    'TE',
    'trailers',
    'Transfer-Encoding',
    'chunked',
    'Upgrade',
    'x',
    'Proxy-Connection',
    'y',
    'Set-Cookie',
    'a=1',
    'set-cookie',
    'b=2',
  ];
  expect(withoutHopByHop(raw)).toEqual(['Host', 'a', 'Set-Cookie', 'a=1', 'set-cookie', 'b=2']);
});
