import { pino } from 'pino';
import { onShutdownSignal } from '../shutdown-signal.js';

export interface ServerCommandOptions {
  port?: string;
  host?: string;
  domain?: string;
  publicUrl?: string;
  json?: boolean;
  logLevel?: string;
  token?: string[];
  tokenFile?: string;
  tokenSecret?: string;
  allowAnonymous?: boolean;
}

/** Agent tokens from flags, TUNNEL2_TOKENS (comma-separated) and a file (one per line, # comments). */
async function collectTokens(options: ServerCommandOptions): Promise<string[]> {
  const tokens = [...(options.token ?? [])];
  const fromEnv = process.env.TUNNEL2_TOKENS;
  if (fromEnv) tokens.push(...fromEnv.split(','));
  if (options.tokenFile !== undefined) {
    const { readFile } = await import('node:fs/promises');
    const text = await readFile(options.tokenFile, 'utf8');
    tokens.push(...text.split('\n').filter((line) => !line.trimStart().startsWith('#')));
  }
  return tokens.map((t) => t.trim()).filter((t) => t !== '');
}

/** `tunnel2 server`: an edge with the in-memory registry. The edge is loaded only for this command. */
export async function runServerCommand(options: ServerCommandOptions): Promise<number> {
  const { buildEdge } = await import('@tunnel2/edge');
  const port = options.port === undefined ? 8080 : Number(options.port);
  const secret = options.tokenSecret ?? process.env.TUNNEL2_TOKEN_SECRET;
  const logger = pino({ level: options.logLevel ?? 'info' }, pino.destination(2));
  const edge = buildEdge({
    port,
    host: options.host ?? '127.0.0.1',
    domain: options.domain,
    publicUrl: options.publicUrl,
    logger,
    auth: {
      tokens: await collectTokens(options),
      ...(secret ? { tokenSecret: secret } : {}),
      ...(options.allowAnonymous ? { allowAnonymous: true } : {}),
    },
  });
  const { url } = await edge.listen();
  if (options.json) {
    process.stdout.write(`${JSON.stringify({ event: 'listening', url, domain: edge.options.domain })}\n`);
  } else {
    process.stdout.write(
      `tunnel2 edge listening on ${url}\n` +
        `agents:  npx tunnel2 http <port> --server ${url}\n` +
        `tunnels: http://<name>.${edge.options.domain}:${new URL(url).port}/  and  ${url}/session/<name>/\n`,
    );
  }
  return new Promise<number>((resolve) => {
    const stopListening = onShutdownSignal(() => {
      stopListening();
      void edge.close().then(() => resolve(0));
    });
  });
}
