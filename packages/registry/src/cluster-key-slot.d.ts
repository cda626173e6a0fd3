// The package ships no types. It is the slot function ioredis itself routes by, so grouping a pipeline with
// it agrees with ioredis's own same-nodes check.
declare module 'cluster-key-slot' {
  /** The Redis Cluster slot (0-16383) of a key, honouring a `{hash tag}`. */
  export default function calculateSlot(key: string): number;
}
