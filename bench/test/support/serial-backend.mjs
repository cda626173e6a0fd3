// A deliberately slow backend, as its own process: one request at a time, each held `delayMs` (argv[2],
// default 20) by a timer before its answer. It serves at most 1000 / delayMs requests a second whatever the
// machine does (a sleep, not CPU), so a rate above that bends the direct side deterministically.
// Prints its URL as its first stdout line.
import { createServer } from 'node:http';

const delayMs = Number(process.argv[2] ?? 20);
const queue = [];
let busy = false;

function next() {
  const res = queue.shift();
  if (res === undefined) {
    busy = false;
    return;
  }
  busy = true;
  setTimeout(() => {
    res.end('ok');
    next();
  }, delayMs);
}

const server = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    queue.push(res);
    if (!busy) next();
  });
});
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`http://127.0.0.1:${server.address().port}\n`);
});
process.on('SIGTERM', () => process.exit(0));
