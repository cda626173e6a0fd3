import { Counter, Gauge, type Registry } from 'prom-client';

/** What the TLS metrics read of the public port (`listeners/public-port.ts`'s EdgeTls is one). */
export interface MeteredTls {
  readonly reloads: Readonly<Record<string, number>>;
  /** When the certificate each pair serves now expires, by its tlsCert file. */
  expiries(): { cert: string; notAfter: Date }[];
}

/** The metrics of TLS at the edge, read when Prometheus scrapes: certificate reloads and expiry. */
export function collectTlsMetrics(registry: Registry, tls: MeteredTls): void {
  new Counter({
    name: 'tunnel2_edge_tls_reloads_total',
    help: 'TLS certificate reloads (file change, poll, SIGHUP) that changed a pair: result="ok", or "failed" (a pair did not load and kept its previous certificate)',
    labelNames: ['result'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [result, n] of Object.entries(tls.reloads)) this.inc({ result }, n);
    },
  });
  // As Traefik's traefik_tls_certs_not_after: a renewal that keeps failing shows here weeks before clients see it.
  new Gauge({
    name: 'tunnel2_edge_tls_certificate_not_after_seconds',
    help: 'When the certificate each tlsCert serves now expires (Unix seconds); alert on it minus time()',
    labelNames: ['cert'],
    registers: [registry],
    collect() {
      this.reset();
      for (const { cert, notAfter } of tls.expiries()) {
        this.set({ cert }, Math.floor(notAfter.getTime() / 1000));
      }
    },
  });
}
