import { type FSWatcher, watch } from 'node:fs';
import { dirname } from 'node:path';
import type { SecureContext } from 'node:tls';
import type { Logger } from 'pino';
import {
  type CertificateFiles,
  type CertificatePair,
  CertificateProblem,
  choosePair,
  coveringPair,
  loadCertificatePair,
} from './certificate-pair.js';

export interface CertificateStoreOptions {
  pairs: readonly CertificateFiles[];
  logger: Logger;
  /** A burst of file events (a cert and its key written one after the other) becomes one reload after this. */
  debounceMs?: number;
  /** The files are also read this often: fs.watch misses events on some file systems (NFS, some mounts). */
  pollMs?: number;
}

/** A certificate this close to its notAfter is warned of when loaded: its renewal is late (certbot renews at 30 days). */
const EXPIRY_WARNING_MS = 14 * 24 * 3_600_000;

/** Reloads since start, by outcome (the metric `tunnel2_edge_tls_reloads_total{result}`). */
export interface ReloadCounts {
  ok: number;
  failed: number;
}

/**
 * The edge's certificates: one pair per `tlsCert`/`tlsKey`, the context a handshake gets chosen by SNI
 * (choosePair), and their reload. A reload reads every pair again; a pair whose files changed gets a new
 * SecureContext, used by handshakes from then on (a connection keeps the one it was made with: nothing is
 * dropped); a pair that no longer loads (a half-written file, a key that is not the new certificate's) keeps
 * the old one and is logged naming the file (once while the same problem stays, whatever the polls find), so
 * the next write, which completes the pair, is taken. Reloads come from file events in the files' folders (debounced), a poll, and reload() (SIGHUP).
 */
export class CertificateStore {
  readonly #options: CertificateStoreOptions;
  #pairs: CertificatePair[];
  readonly reloads: ReloadCounts = { ok: 0, failed: 0 };
  readonly #watchers: FSWatcher[] = [];
  #debounce: NodeJS.Timeout | undefined;
  #poll: NodeJS.Timeout | undefined;
  readonly #onChange: (() => void)[] = [];
  /** The last problem of each pair that does not load, by its position. */
  readonly #failures = new Map<number, string>();

  /** Loads every pair; throws the CertificateProblem of the first that does not load (the edge does not start). */
  constructor(options: CertificateStoreOptions) {
    this.#options = options;
    this.#pairs = options.pairs.map((files) => loadCertificatePair(files));
    for (const pair of this.#pairs) this.#warnIfExpiring(pair);
  }

  /** When each pair's certificate served now expires (the metric `tunnel2_edge_tls_certificate_not_after_seconds`). */
  expiries(): { cert: string; notAfter: Date }[] {
    return this.#pairs.map((pair) => ({ cert: pair.files.cert, notAfter: pair.notAfter }));
  }

  /** The context for a client's SNI name (the first pair's without one, or for a name no pair has). */
  contextFor(servername: string | undefined): SecureContext {
    // The constructor loaded at least one pair (settings refuse TLS without one).
    return choosePair(this.#pairs, servername)!.context;
  }

  /** Whether a certificate names `name` (exactly, or by a wildcard: `*.x` itself for `*.x`). */
  covers(name: string): boolean {
    return coveringPair(this.#pairs, name) !== undefined;
  }

  /** The first pair's PEM, what a client without SNI gets (tls.Server's default context). */
  get defaultPem(): { cert: Buffer; key: Buffer } {
    return this.#pairs[0]!.pem;
  }

  /** Called after a reload that changed a pair. */
  onChange(listener: () => void): void {
    this.#onChange.push(listener);
  }

  /** Reads every pair again (see the class). `reason` goes into the log line. */
  reload(reason: string): { changed: number; failed: number } {
    const log = this.#options.logger;
    let changed = 0;
    let failed = 0;
    let newlyFailed = 0;
    this.#pairs = this.#pairs.map((pair, index) => {
      let next: CertificatePair;
      try {
        next = loadCertificatePair(pair.files);
      } catch (err) {
        failed++;
        const message = (err as Error).message;
        // A pair left broken is found again by every poll: said once, and again only when asked (SIGHUP)
        // or when what is wrong changes.
        if (this.#failures.get(index) === message && reason === 'poll') return pair;
        this.#failures.set(index, message);
        newlyFailed++;
        const file = err instanceof CertificateProblem ? err.file : pair.files.cert;
        log.warn({ err, file, reason }, `TLS certificate not reloaded, the previous one is kept: ${message}`);
        return pair;
      }
      this.#failures.delete(index);
      if (next.pem.cert.equals(pair.pem.cert) && next.pem.key.equals(pair.pem.key)) return pair;
      changed++;
      this.#warnIfExpiring(next);
      return next;
    });
    if (newlyFailed > 0) this.reloads.failed++;
    else if (changed > 0) this.reloads.ok++;
    if (changed > 0) {
      log.info(
        { reason, changed, subjects: this.#pairs.map((pair) => pair.subject) },
        'TLS certificates reloaded',
      );
      for (const listener of this.#onChange) listener();
    } else if (failed === 0 && reason === 'SIGHUP') {
      log.info({ reason }, 'TLS certificates unchanged');
    }
    return { changed, failed };
  }

  /** An expired certificate is still served (as nginx does), but said: clients will refuse it. */
  #warnIfExpiring(pair: CertificatePair): void {
    const left = pair.notAfter.getTime() - Date.now();
    if (left > EXPIRY_WARNING_MS) return;
    this.#options.logger.warn(
      { file: pair.files.cert, subject: pair.subject, notAfter: pair.notAfter.toISOString() },
      left <= 0
        ? 'TLS certificate has expired: clients refuse it until it is renewed'
        : 'TLS certificate expires within 14 days: check its renewal',
    );
  }

  /** Starts watching the files' folders (and polling); stop() ends both. */
  watch(): void {
    const schedule = (): void => {
      clearTimeout(this.#debounce);
      this.#debounce = setTimeout(() => this.reload('file changed'), this.#options.debounceMs ?? 250);
      this.#debounce.unref();
    };
    const folders = new Set(
      this.#pairs.flatMap((pair) => [dirname(pair.files.cert), dirname(pair.files.key)]),
    );
    for (const folder of folders) {
      try {
        // The folder, not the file: a file replaced by rename (certbot, a Kubernetes secret's symlink swap)
        // is a new inode a file watch would never see.
        const watcher = watch(folder, { persistent: false }, schedule);
        watcher.on('error', (err) =>
          this.#options.logger.warn({ err, folder }, 'TLS certificate folder watch failed'),
        );
        this.#watchers.push(watcher);
      } catch (err) {
        this.#options.logger.warn(
          { err, folder },
          'TLS certificate folder not watched: changes are seen by the poll',
        );
      }
    }
    this.#poll = setInterval(() => this.reload('poll'), this.#options.pollMs ?? 60_000);
    this.#poll.unref();
  }

  stop(): void {
    clearTimeout(this.#debounce);
    clearInterval(this.#poll);
    for (const watcher of this.#watchers.splice(0)) watcher.close();
  }
}
