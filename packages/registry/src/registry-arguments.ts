import { RegistryError, RegistryErrorCode } from './errors.js';
import type { ClaimInput, HeldLease, NodeAnnouncement } from './session-registry.js';

/*
 * Argument checks shared by every SessionRegistry implementation, so the memory and a future Redis
 * registry refuse exactly the same inputs (the contract suite checks it). A bad argument is a caller bug,
 * so it rejects with INVALID_ARGUMENT instead of answering false like a stale epoch does.
 */

function invalid(message: string): RegistryError {
  return new RegistryError(RegistryErrorCode.INVALID_ARGUMENT, message);
}

function checkKey(what: string, value: unknown): void {
  if (typeof value !== 'string' || value.length === 0) throw invalid(`${what} must be a non-empty string`);
}

/** A session name: a non-empty string (the edge has already checked its syntax). */
export function checkName(name: unknown): void {
  checkKey('name', name);
}

/** An epoch as handed out by claim: a positive safe integer. */
export function checkEpoch(epoch: unknown): void {
  if (typeof epoch !== 'number' || !Number.isSafeInteger(epoch) || epoch < 1) {
    throw invalid(`epoch must be a positive integer, got ${String(epoch)}`);
  }
}

/** A lease length: a finite number of ms, > 0 (a zero lease would be expired the moment it is granted). */
export function checkTtl(what: string, ms: unknown): void {
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms <= 0) {
    throw invalid(`${what} must be a positive number of ms, got ${String(ms)}`);
  }
}

/** A grace period: a finite number of ms, >= 0 (0 frees the name at once). */
export function checkGrace(ms: unknown): void {
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) {
    throw invalid(`graceMs must be a non-negative number of ms, got ${String(ms)}`);
  }
}

export function checkClaimInput(input: ClaimInput): void {
  if (typeof input !== 'object' || input === null) throw invalid('claim input must be an object');
  checkName(input.name);
  checkKey('nodeId', input.nodeId);
  checkKey('owner', input.owner);
  checkTtl('ttlMs', input.ttlMs);
  if (input.account !== undefined) checkKey('account', input.account);
}

/** An owner key: a non-empty string. */
export function checkOwner(owner: unknown): void {
  checkKey('owner', owner);
}

/** A key space of names (`<space>:<key>`): a non-empty string without a colon. */
export function checkSpace(space: unknown): void {
  checkKey('space', space);
  if ((space as string).includes(':')) throw invalid('space must not contain ":"');
}

/** The key space a name belongs to (the text before its first colon), or undefined for a plain name. */
export function spaceOf(name: string): string | undefined {
  const colon = name.indexOf(':');
  return colon <= 0 ? undefined : name.slice(0, colon);
}

/** A node id: a non-empty string. */
export function checkNodeId(nodeId: unknown): void {
  checkKey('nodeId', nodeId);
}

/** A node record's signature is a few dozen characters; the bound keeps a record small whatever a caller passes. */
const MAX_SIGNATURE_LENGTH = 512;

export function checkNodeAnnouncement(input: NodeAnnouncement): void {
  if (typeof input !== 'object' || input === null) throw invalid('node announcement must be an object');
  checkKey('nodeId', input.nodeId);
  if (typeof input.url !== 'string' || !URL.canParse(input.url)) {
    throw invalid(`url must be an absolute URL, got ${String(input.url)}`);
  }
  checkTtl('ttlMs', input.ttlMs);
  if (
    input.signature !== undefined &&
    (typeof input.signature !== 'string' || input.signature.length > MAX_SIGNATURE_LENGTH)
  ) {
    throw invalid(`signature must be a string of at most ${MAX_SIGNATURE_LENGTH} characters`);
  }
}

/** The leases of a renewMany: an array of `{ name, epoch }`, each checked like renew's arguments. */
export function checkHeldLeases(leases: readonly HeldLease[]): void {
  if (!Array.isArray(leases)) throw invalid('leases must be an array');
  for (const lease of leases) {
    if (typeof lease !== 'object' || lease === null) throw invalid('each lease must be an object');
    checkName(lease.name);
    checkEpoch(lease.epoch);
  }
}
