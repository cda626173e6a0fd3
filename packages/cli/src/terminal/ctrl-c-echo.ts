/**
 * A terminal echoes Ctrl-C as `^C` where its cursor is, and the line is not ended: what the CLI writes next
 * would follow it on the same line (`^Ctunnel2: closed`). Ended here, on the stream the CLI's lines go to
 * on that terminal, before anything else is written. Nothing is written to a pipe or a file.
 */
export function endEchoedCtrlC(): void {
  if (process.stdout.isTTY) process.stdout.write('\n');
  else if (process.stderr.isTTY) process.stderr.write('\n');
}
