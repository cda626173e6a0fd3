/** The backend's endpoints, as listed by GET /loadtest/info. */
export const endpoints = [
  { method: 'GET', path: '/loadtest/ping', description: 'tiny text body "pong"' },
  { method: 'GET', path: '/loadtest/get', description: '~400 B JSON document (pre-serialized)' },
  { method: 'GET', path: '/loadtest/fast', description: 'small pre-serialized JSON' },
  { method: 'GET', path: '/loadtest/delay/:ms', description: 'answers after ms (0..60000)' },
  { method: 'POST', path: '/loadtest/echo', description: 'streams the request body back' },
  { method: 'GET', path: '/loadtest/info', description: 'this list' },
  {
    method: 'GET',
    path: '/bytes/:n',
    description: 'n deterministic bytes, streamed (?chunked=1 omits Content-Length)',
  },
  { method: 'GET', path: '/stream/:chunks', description: 'small chunks, ?interval=<ms> apart' },
  {
    method: 'ANY',
    path: '/echo/request',
    description: 'JSON of the request as seen: method, url, raw headers, body sha256',
  },
  { method: 'POST|PUT', path: '/upload', description: 'consumes the body, answers { bytes, sha256 }' },
  { method: 'GET', path: '/headers/multi', description: 'two Set-Cookie and a repeated X-Multi header' },
  { method: 'GET', path: '/status/:code', description: 'answers that status' },
  {
    method: 'GET',
    path: '/abort-after/:n',
    description: 'sends n bytes of a longer declared body, then drops the connection',
  },
] as const;
