import type { Registry } from 'prom-client';
import eventLoopLag from 'prom-client/lib/metrics/eventLoopLag.js';
import heapSizeAndUsed from 'prom-client/lib/metrics/heapSizeAndUsed.js';
import heapSpacesSizeAndUsed from 'prom-client/lib/metrics/heapSpacesSizeAndUsed.js';
import osMemoryHeap from 'prom-client/lib/metrics/osMemoryHeap.js';
import processCpuTotal from 'prom-client/lib/metrics/processCpuTotal.js';
import processHandles from 'prom-client/lib/metrics/processHandles.js';
import processMaxFileDescriptors from 'prom-client/lib/metrics/processMaxFileDescriptors.js';
import processOpenFileDescriptors from 'prom-client/lib/metrics/processOpenFileDescriptors.js';
import processRequests from 'prom-client/lib/metrics/processRequests.js';
import processResources from 'prom-client/lib/metrics/processResources.js';
import processStartTime from 'prom-client/lib/metrics/processStartTime.js';
import version from 'prom-client/lib/metrics/version.js';

/**
 * prom-client's default process and Node.js metrics, except `nodejs_gc_duration_seconds`. That one observes
 * every garbage collection through a PerformanceObserver, and Node builds an entry (with deprecated getters)
 * for each; a proxy collects its young generation many times a second under load, so the observer cost
 * about 1 µs per tunnelled request (bench/README.md, optimization log). GC time is still visible through
 * the CPU and heap metrics. The collectors are imported one by one (statically, so the published bundle
 * carries them) because collectDefaultMetrics() has no way to leave one out.
 */
export function collectProcessMetrics(registry: Registry): void {
  const config = { eventLoopMonitoringPrecision: 10 };
  for (const collect of [
    processCpuTotal,
    processStartTime,
    osMemoryHeap,
    processOpenFileDescriptors,
    processMaxFileDescriptors,
    eventLoopLag,
    processResources,
    processHandles,
    processRequests,
    heapSizeAndUsed,
    heapSpacesSizeAndUsed,
    version,
  ]) {
    collect(registry, config);
  }
}
