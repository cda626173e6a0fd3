/** Stable error codes of the registry package. */
export const RegistryErrorCode = {
  INVALID_ARGUMENT: 'TUNNEL2_ERR_REGISTRY_INVALID_ARGUMENT',
  CLOSED: 'TUNNEL2_ERR_REGISTRY_CLOSED',
  UNAVAILABLE: 'TUNNEL2_ERR_REGISTRY_UNAVAILABLE',
} as const;
export type RegistryErrorCode = (typeof RegistryErrorCode)[keyof typeof RegistryErrorCode];

export class RegistryError extends Error {
  readonly code: RegistryErrorCode;
  constructor(code: RegistryErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = 'RegistryError';
  }
}
