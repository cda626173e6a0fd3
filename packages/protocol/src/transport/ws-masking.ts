/**
 * Whether a WebSocket client's frames to `url` need a real mask. Masking exists to stop browser scripts from
 * confusing plain-text proxies (RFC 6455 §10.3); under TLS or on loopback no such proxy can read the bytes,
 * and a zero mask (`zeroMask`) spares a copy of every byte sent: ws skips the XOR for an all-zero mask.
 */
export function maskingNeeded(url: string): boolean {
  const { protocol, hostname } = new URL(url);
  const tls = protocol === 'wss:' || protocol === 'https:';
  const loopback = hostname === 'localhost' || hostname === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(hostname);
  return !(tls || loopback);
}

/** ws's `generateMask` for a connection that needs no mask (see maskingNeeded). */
export function zeroMask(mask: Buffer): void {
  mask.fill(0);
}
