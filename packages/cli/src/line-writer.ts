/**
 * Coalesces output lines written during one event-loop turn into a single write. At thousands of requests
 * per second a write per `request` line costs more than the tunnel itself (stdout to a file or pipe is a
 * synchronous syscall in Node).
 */
export function createLineWriter(stream: NodeJS.WritableStream): {
  write: (line: string) => void;
  flush: () => void;
} {
  let pending = '';
  let scheduled = false;
  const flush = (): void => {
    scheduled = false;
    if (pending === '') return;
    const text = pending;
    pending = '';
    stream.write(text);
  };
  return {
    write(line) {
      pending += line;
      if (!scheduled) {
        scheduled = true;
        setImmediate(flush);
      }
    },
    flush,
  };
}
