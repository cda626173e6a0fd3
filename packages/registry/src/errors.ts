/** Stable error codes of the registry package. Branch on these, never on messages. */
export const RegistryErrorCode = {
  /** A caller passed a name, owner, epoch or duration the contract does not allow. */
  INVALID_ARGUMENT: 'TUNNEL2_ERR_REGISTRY_INVALID_ARGUMENT',
  /** The registry was closed; nothing more can be asked of it. */
  CLOSED: 'TUNNEL2_ERR_REGISTRY_CLOSED',
  /** The backing store (e.g. Redis) cannot be reached; `cause` carries the client's error. */
  UNAVAILABLE: 'TUNNEL2_ERR_REGISTRY_UNAVAILABLE',
} as const;
export type RegistryErrorCode = (typeof RegistryErrorCode)[keyof typeof RegistryErrorCode];

// The same global brand as @tunnel2/protocol's Tunnel2Error: the edge recognises registry errors as tunnel2
// errors (and reads their code) without this package depending on protocol.
const brand = Symbol.for('tunnel2.error');

/** Every error the registry throws: a stable `code` and an optional `cause`. */
export class RegistryError extends Error {
  readonly code: RegistryErrorCode;
  constructor(code: RegistryErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }

  /** True for a registry error even when it comes from another copy of this package. */
  static isRegistryError(value: unknown): value is RegistryError {
    return (
      typeof value === 'object' &&
      value !== null &&
      (value as { [brand]?: boolean })[brand] === true &&
      Object.values<unknown>(RegistryErrorCode).includes((value as { code?: unknown }).code)
    );
  }
}
Object.defineProperty(RegistryError.prototype, brand, { value: true });
