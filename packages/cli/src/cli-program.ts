import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { VERSION } from './version.js';

/** The code of a usage error the CLI finds itself in what commander parsed (exit 2, as commander's own). */
const USAGE_ERROR = 'tunnel2.usage';

/** The edge refuses a shorter --token-secret (packages/edge/src/settings/edge-options.ts; cli.test.ts checks both). */
const MIN_TOKEN_SECRET_LENGTH = 16;

function hostHeaderArg(value: string): string {
  if (value.trim() === '') throw new InvalidArgumentError('expected rewrite, preserve or a host value');
  return value;
}

/** The edge an agent command connects to (`http`, `tcp`). */
function serverOption(): Option {
  // No commander default: the agent resolves flag > env > default itself (resolveServer), so an address that
  // is not a URL is named by where it came from.
  return new Option(
    '-s, --server <url>',
    'edge server URL (env TUNNEL2_SERVER, default http://localhost:8080)',
  );
}

/**
 * Commander's codes for a command line it cannot take: a usage error, exit 2 (as POSIX utilities, npm and
 * git do), told apart from a failure of the command itself (exit 1).
 */
const USAGE_ERROR_CODES: ReadonlySet<string> = new Set([
  'commander.unknownOption',
  'commander.unknownCommand',
  'commander.missingArgument',
  'commander.optionMissingArgument',
  'commander.missingMandatoryOptionValue',
  'commander.excessArguments',
  'commander.invalidArgument',
  'commander.conflictingOption',
  USAGE_ERROR,
]);

const program = new Command()
  .name('tunnel2')
  .description('Expose a local HTTP server on a public URL through one WebSocket.')
  .version(VERSION, '-v, --version')
  // Inherited by every command defined below: errors are thrown to the catch at the end (which sets the
  // exit status) instead of exiting, and read `tunnel2: ...` as the CLI's other errors do.
  .exitOverride()
  .configureOutput({ outputError: (text, write) => write(text.replace(/^error: /, 'tunnel2: ')) });

/**
 * A command is over: the process ends by itself once nothing is left open, its last output written (in a
 * worker that output is still on its way to the main thread). Something still open must not keep a stopped
 * agent or server alive: a handle some library left, or a write to a stdout whose reader is alive but no
 * longer reads (`tunnel2 http 3000 --json | stuck-consumer`), which Node waits for before exiting. A second
 * later, it exits anyway.
 */
function exitOnceDone(code: number): void {
  process.exitCode = code;
  setTimeout(() => process.exit(code), 1_000).unref();
}

program
  .command('http')
  .description('forward a public URL to a local HTTP server')
  .argument(
    '<target>',
    'local port, host:port or URL (3000, localhost:3000, http://127.0.0.1:3000, https://localhost:8443)',
  )
  .addOption(serverOption())
  .option('-n, --subdomain <name>', 'requested subdomain (default: random, unguessable)')
  .option(
    '--replica',
    'join the subdomain beside other agents with the same token that say --replica too (the edge balances them)',
  )
  .option('-t, --token <token>', 'agent token (env TUNNEL2_TOKEN)')
  .option(
    '--host-header <mode>',
    'Host seen by the backend: rewrite | preserve | <value>',
    hostHeaderArg,
    'rewrite',
  )
  .option(
    '--basic-auth <user:password>',
    'require HTTP Basic credentials on the public URL (checked by the edge)',
  )
  .option('--allow-ip <cidrs>', 'only these client addresses may use the public URL (comma-separated CIDRs)')
  .option(
    '--insecure',
    'https:// target: accept its certificate even if self-signed, expired or for another host',
  )
  .option('--ca <file>', 'https:// target: also trust this CA (PEM file), e.g. mkcert -CAROOT/rootCA.pem')
  .option('--h2c', 'the backend speaks HTTP/2 with prior knowledge (gRPC servers): streams, trailers, resets')
  .option('--http1', 'https:// target: HTTP/1.1 only (by default h2 is used when the backend offers it)')
  .option(
    '--inspect <host:port>',
    'serve the request inspector here (default 127.0.0.1:4040, next free port)',
  )
  .option('--no-inspect', 'do not capture requests or serve the inspector')
  .option('--inspect-body-limit <bytes>', 'bytes the inspector keeps of each body (default 1m)')
  .option('--inspect-budget <bytes>', 'memory all inspector entries together may hold (default 64m)')
  .option(
    '--json',
    'one JSON event per line on stdout (ready, request, reconnecting, error, hint, finishing, closed, dropped)',
  )
  .option('--log-level <level>', 'diagnostic log level on stderr', 'warn')
  .option('--no-tty', 'plain line log even when stdout is a terminal (no status header)')
  .option('--no-color', 'no colours in the terminal view (as NO_COLOR=1 does)')
  .addHelpText(
    'after',
    '\nExamples:\n  $ tunnel2 http 3000\n  $ tunnel2 http localhost:5173 --subdomain myapp --server https://tunnel.example.com\n  $ tunnel2 http 8080 --json | jq .\n  $ tunnel2 http https://localhost:8443 --insecure\n  $ tunnel2 http 50051 --h2c                # a gRPC server\n',
  )
  .action(async (target: string, options) => {
    // Each command loads only what it needs: the agent never loads the edge, the edge never loads undici.
    const { runHttpCommand } = await import('./commands/http-command.js');
    exitOnceDone(await runHttpCommand(target, options));
  });

program
  .command('tcp')
  .description('forward a public TCP port of the edge to a local TCP service')
  .argument('<target>', 'local port or host:port (5432, localhost:6379)')
  .addOption(serverOption())
  .option('-t, --token <token>', 'agent token (env TUNNEL2_TOKEN)')
  .option('--remote-port <port>', "ask for this public port of the edge's TCP range (default: a free one)")
  .option(
    '--replica',
    'share --remote-port with other agents with the same token that say --replica too (each connection goes to one)',
  )
  .option('--allow-ip <cidrs>', 'only these client addresses may connect (comma-separated CIDRs)')
  .option(
    '--json',
    'one JSON event per line on stdout (ready, connection, reconnecting, error, hint, finishing, closed, dropped)',
  )
  .option('--log-level <level>', 'diagnostic log level on stderr', 'warn')
  .option('--no-tty', 'plain line log even when stdout is a terminal (no status header)')
  .option('--no-color', 'no colours in the terminal view (as NO_COLOR=1 does)')
  .addHelpText(
    'after',
    '\nExamples:\n  $ tunnel2 tcp 5432\n  $ tunnel2 tcp localhost:6379 --remote-port 20001 --json\n',
  )
  .action(async (target: string, options) => {
    const { runTcpCommand } = await import('./commands/tcp-command.js');
    exitOnceDone(await runTcpCommand(target, options));
  });

program
  .command('start')
  .description('start tunnels from tunnel2.yml over one session')
  .argument('[names...]', 'the tunnels of the file to start')
  .option('--all', 'start every tunnel of the file')
  .option('-c, --config <file>', 'config file (.yml/.yaml or .json)', 'tunnel2.yml')
  .option('-s, --server <url>', 'edge server URL (overrides env TUNNEL2_SERVER and the file)')
  .option('-t, --token <token>', 'agent token (overrides env TUNNEL2_TOKEN and the file)')
  .option('--json', "one JSON event per line on stdout, each with its tunnel's name in `tunnel`")
  .option('--log-level <level>', 'diagnostic log level on stderr', 'warn')
  .option('--no-tty', 'plain line log even when stdout is a terminal (no status header)')
  .option('--no-color', 'no colours in the terminal view (as NO_COLOR=1 does)')
  .addHelpText(
    'after',
    '\nExamples:\n  $ tunnel2 start --all\n  $ tunnel2 start web api --config dev.yml\n' +
      // The npm package ships the schema, not docs/: point at what an installed copy has.
      '\nEvery key of the file: the JSON Schema shipped with this package (tunnel2.schema.json; editors\n' +
      'read it from a first line "# yaml-language-server: $schema=./node_modules/@tunnel2/cli/tunnel2.schema.json"),\n' +
      'and docs/config-file.md in the tunnel2 repository.\n',
  )
  .action(async (names: string[], options) => {
    const { runStartCommand } = await import('./commands/start-command.js');
    exitOnceDone(await runStartCommand(names, options));
  });

program
  .command('server')
  .description('run an edge server (every setting: tunnel2 server --help)')
  // The edge parses its own arguments from its settings table (flags, TUNNEL2_* variables, the config file);
  // commander only passes them on. --config is declared so the command lists as `server [options]`.
  .option('-c, --config <file>', 'JSON config file')
  .helpOption(false)
  .allowUnknownOption()
  .allowExcessArguments()
  .action(async (options: { config?: string }, command: Command) => {
    const { runServerCommand } = await import('./commands/server-command.js');
    const args = options.config === undefined ? command.args : ['--config', options.config, ...command.args];
    // Once drained (or after a second signal) the process ends by itself when nothing is left open, with
    // its last output written (in a worker that output is still on its way to the main thread). A handle
    // some library left open must not keep a stopping server running: a second later, it exits anyway.
    exitOnceDone(await runServerCommand(args));
  });

program
  .command('token')
  .description('mint a signed agent token for an edge started with --token-secret')
  .requiredOption(
    '--secret <secret>',
    `the edge token secret, at least ${MIN_TOKEN_SECRET_LENGTH} characters (env TUNNEL2_TOKEN_SECRET)`,
    process.env.TUNNEL2_TOKEN_SECRET,
  )
  .option('--subject <name>', 'who the token is for: tokens of one subject share names', 'agent')
  .option('--ttl <seconds>', 'validity in seconds', '2592000')
  .addHelpText(
    'after',
    '\nExamples:\n' +
      '  $ SECRET="$(openssl rand -hex 32)"                  # the edge and this command share it: keep it\n' +
      '  $ tunnel2 server --token-secret "$SECRET"           # the edge, accepting tokens signed with it\n' +
      '  $ tunnel2 token --secret "$SECRET" --subject alice  # a token for alice, valid 30 days\n' +
      '  $ TUNNEL2_TOKEN_SECRET="$SECRET" tunnel2 token --subject ci --ttl 86400\n' +
      '  $ tunnel2 http 3000 --token "$TOKEN" --server https://tunnel.example.com\n',
  )
  .action(async (options: { secret: string; subject: string; ttl: string }, command: Command) => {
    // A secret the edge would refuse mints tokens no edge accepts: refused here, before anyone uses one.
    if (options.secret.length < MIN_TOKEN_SECRET_LENGTH) {
      command.error(
        `tunnel2: the token secret is ${options.secret.length} characters; the edge takes at least ${MIN_TOKEN_SECRET_LENGTH} (e.g. openssl rand -hex 32)`,
        { exitCode: 2, code: USAGE_ERROR },
      );
    }
    const ttl = Number(options.ttl);
    if (!Number.isInteger(ttl) || ttl <= 0) {
      command.error(`tunnel2: --ttl ${options.ttl}: a positive whole number of seconds`, {
        exitCode: 2,
        code: USAGE_ERROR,
      });
    }
    const { createSignedToken } = await import('@tunnel2/edge');
    process.stdout.write(`${createSignedToken(options.secret, options.subject, ttl)}\n`);
  });

// A usage error is said in three lines: what is wrong, the command's usage line, and where the rest is (not
// the whole help, which would push the error off the screen).
program.showHelpAfterError(`usage: tunnel2 ${program.usage()}\nsee tunnel2 --help`);
for (const command of program.commands) {
  const name = `tunnel2 ${command.name()}`;
  command.showHelpAfterError(`usage: ${name} ${command.usage()}\nsee ${name} --help`);
}

program.parseAsync(process.argv).catch((err: unknown) => {
  if (err instanceof CommanderError) {
    // Commander said it already (the error, or the help or version asked for).
    process.exitCode = USAGE_ERROR_CODES.has(err.code) ? 2 : err.exitCode;
    return;
  }
  process.stderr.write(`tunnel2: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = 1;
});
