// prom-client ships no types for its individual default-metric collectors (see process-metrics.ts).
declare module 'prom-client/lib/metrics/*.js' {
  import type { Registry } from 'prom-client';

  const collect: (registry: Registry | undefined, config: { eventLoopMonitoringPrecision?: number }) => void;
  export default collect;
}
