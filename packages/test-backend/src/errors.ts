/** Stable error codes of the test backend. Branch on these, never on messages. */
export const TestBackendErrorCode = {
  /** An option or helper argument out of range (a port, a byte count). */
  INVALID_ARGUMENT: 'TUNNEL2_ERR_TEST_BACKEND_INVALID_ARGUMENT',
  /** The gRPC test service's .proto does not declare a method the code serves (a broken checkout). */
  GRPC_PROTO: 'TUNNEL2_ERR_TEST_BACKEND_GRPC_PROTO',
} as const;
export type TestBackendErrorCode = (typeof TestBackendErrorCode)[keyof typeof TestBackendErrorCode];

// The global brand shared with @tunnel2/protocol's Tunnel2Error, without depending on that package.
const brand = Symbol.for('tunnel2.error');

/** Every error the test backend throws: a stable `code` and an optional `cause`. */
export class TestBackendError extends Error {
  readonly code: TestBackendErrorCode;
  constructor(code: TestBackendErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }
}
Object.defineProperty(TestBackendError.prototype, brand, { value: true });

export function invalidArgument(message: string): TestBackendError {
  return new TestBackendError(TestBackendErrorCode.INVALID_ARGUMENT, message);
}
