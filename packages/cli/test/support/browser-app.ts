import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer } from 'ws';

/** The page the browser loads through the tunnel: a WebSocket and an EventSource, results in the DOM. */
const page = `<!doctype html>
<html>
<head><meta charset="utf-8"><title>tunnel2 browser check</title>
<style>body{font-family:sans-serif;margin:2em} li{font-family:monospace} #status{font-weight:bold}</style></head>
<body>
<h1>tunnel2: WebSocket and SSE through the tunnel</h1>
<p>Status: <span id="status">running</span></p>
<h2>WebSocket echoes</h2><ul id="ws"></ul>
<h2>Server-sent events</h2><ul id="sse"></ul>
<script>
const finished = new Set();
function done(kind) {
  finished.add(kind);
  if (finished.size === 2) document.getElementById('status').textContent = 'done';
}
function add(list, text) {
  const li = document.createElement('li');
  li.textContent = text;
  document.getElementById(list).appendChild(li);
}
const ws = new WebSocket(location.origin.replace(/^http/, 'ws') + '/ws');
let echoes = 0;
ws.onopen = () => { for (let i = 0; i < 5; i++) ws.send('message ' + i); };
ws.onmessage = (event) => { add('ws', event.data); if (++echoes === 5) { ws.close(); done('ws'); } };
ws.onerror = () => { document.getElementById('status').textContent = 'websocket error'; };
const events = new EventSource('/events');
let received = 0;
events.onmessage = (event) => { add('sse', event.data); if (++received === 3) { events.close(); done('sse'); } };
</script>
</body>
</html>`;

export interface BrowserApp {
  port: number;
  server: Server;
  close(): Promise<void>;
}

/** A tiny app as a developer would tunnel: a page, a WebSocket echo at /ws, and SSE at /events. */
export async function startBrowserApp(): Promise<BrowserApp> {
  const server = createServer((req, res) => {
    if (req.url === '/events') {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      let n = 0;
      const timer = setInterval(() => {
        res.write(`data: event ${n}\n\n`);
        if (++n === 3) clearInterval(timer);
      }, 50);
      res.on('close', () => clearInterval(timer));
      return;
    }
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(page);
  });
  const wss = new WebSocketServer({ server, path: '/ws' });
  wss.on('connection', (ws) => ws.on('message', (data) => ws.send(`echo: ${String(data)}`)));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        for (const client of wss.clients) client.terminate();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
