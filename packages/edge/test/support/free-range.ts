import { createServer } from 'node:net';

/** Ports the host had free a moment ago, as one range (the allocator skips any it finds taken since). */
export async function freeRange(size: number): Promise<{ first: number; last: number }> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const first = 20_000 + Math.floor(Math.random() * 10_000);
    const servers = Array.from({ length: size }, () => createServer());
    const results = await Promise.all(
      servers.map(
        (server, i) =>
          new Promise<boolean>((resolve) => {
            server.once('error', () => resolve(false));
            server.listen({ port: first + i, host: '127.0.0.1', exclusive: true }, () => resolve(true));
          }),
      ),
    );
    await Promise.all(servers.map((s) => (s.listening ? new Promise((r) => s.close(r)) : undefined)));
    if (results.every(Boolean)) return { first, last: first + size - 1 };
  }
  throw new Error('no free port range');
}
