/** Stable error codes of the test services. Branch on these, never on messages. */
export const ServiceErrorCode = {
  /** A native program (redis-server, haproxy, ...) is not installed; the message names the Debian package. */
  NOT_INSTALLED: 'TUNNEL2_ERR_SERVICE_NOT_INSTALLED',
  /** A service exited, did not get ready in time, or did not answer once up; what it printed is kept. */
  START: 'TUNNEL2_ERR_SERVICE_START',
  /** A running service gave a reply that is not what was asked for (or none in time). */
  REPLY: 'TUNNEL2_ERR_SERVICE_REPLY',
} as const;
export type ServiceErrorCode = (typeof ServiceErrorCode)[keyof typeof ServiceErrorCode];

// The same global brand as @tunnel2/protocol's Tunnel2Error, without depending on that package.
const brand = Symbol.for('tunnel2.error');

/** Every error the test services throw on purpose: a stable `code` and an optional `cause`. */
export class ServiceError extends Error {
  readonly code: ServiceErrorCode;
  constructor(code: ServiceErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }
}
Object.defineProperty(ServiceError.prototype, brand, { value: true });
