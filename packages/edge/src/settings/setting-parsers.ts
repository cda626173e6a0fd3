import { availableParallelism } from 'node:os';
import { compileAddressBlocks } from '../access/client-address.js';

// The parsers behind the edge's settings table (edge-config.ts): each turns a raw value (a string from a flag
// or a variable, any JSON value from the config file) into a typed one, or throws a ValueProblem saying what
// is allowed.

/** A raw value as it arrives: a string from a flag or variable, any JSON value from the file. */
export type Raw = unknown;

export interface SettingSpec<T> {
  description: string;
  default: T;
  /** Parses a raw value or throws a ValueProblem saying what is allowed. */
  parse: (raw: Raw) => T;
  /** What the value must be, for errors and the reference. */
  allowed: string;
  /** Redacted in --print-config and logs. */
  secret?: boolean;
  /** For a value that may carry a secret inside it (a URL's password): what --print-config and logs show. */
  redact?: (value: string) => string;
  /** Flag name when it differs from the kebab-cased key (kept for compatibility). */
  flag?: string;
  short?: string;
  /** Variable name when it differs from TUNNEL2_<SNAKE_KEY>. */
  env?: string;
  /** An integer setting's bounds, for --help to say them in the setting's unit. */
  range?: readonly [min: number, max: number];
}

/** Thrown by a parser: its message says what is allowed; the loader names the setting and the source. */
export class ValueProblem extends Error {}

export function integer(min: number, max: number): Pick<SettingSpec<number>, 'parse' | 'allowed' | 'range'> {
  const allowed = `an integer in [${min}, ${max}]`;
  return {
    allowed,
    range: [min, max],
    parse(raw) {
      const value = typeof raw === 'string' && raw.trim() !== '' ? Number(raw.replaceAll('_', '')) : raw;
      if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
        throw new ValueProblem(allowed);
      }
      return value;
    },
  };
}

/** How many edge workers: `auto` (this machine's cores, as Node counts them) or an integer in [1, 256]. */
export function workerCount(): Pick<SettingSpec<number>, 'parse' | 'allowed' | 'range'> {
  const inner = integer(1, 256);
  return {
    allowed: `auto, or ${inner.allowed}`,
    range: inner.range,
    parse: (raw) => (raw === 'auto' ? availableParallelism() : inner.parse(raw)),
  };
}

export function optionalInteger(
  min: number,
  max: number,
): Pick<SettingSpec<number | undefined>, 'parse' | 'allowed' | 'range'> {
  const inner = integer(min, max);
  return {
    allowed: `${inner.allowed}, or unset`,
    range: inner.range,
    parse: (raw) => (raw === undefined || raw === null || raw === '' ? undefined : inner.parse(raw)),
  };
}

export function text(
  check?: (value: string) => boolean,
  allowed = 'a string',
): Pick<SettingSpec<string>, 'parse' | 'allowed'> {
  return {
    allowed,
    parse(raw) {
      if (typeof raw !== 'string' || raw === '' || (check !== undefined && !check(raw))) {
        throw new ValueProblem(allowed);
      }
      return raw;
    },
  };
}

export function optionalText(
  check?: (value: string) => boolean,
  allowed = 'a string',
): Pick<SettingSpec<string | undefined>, 'parse' | 'allowed'> {
  const inner = text(check, allowed);
  return {
    allowed: `${allowed}, or unset`,
    parse: (raw) => (raw === undefined || raw === null || raw === '' ? undefined : inner.parse(raw)),
  };
}

export function oneOf<const T extends string>(
  values: readonly T[],
): Pick<SettingSpec<T>, 'parse' | 'allowed'> {
  const allowed = `one of ${values.join(', ')}`;
  return {
    allowed,
    parse(raw) {
      if (typeof raw !== 'string' || !(values as readonly string[]).includes(raw)) {
        throw new ValueProblem(allowed);
      }
      return raw as T;
    },
  };
}

export function parseBoolean(raw: Raw): boolean {
  if (typeof raw === 'boolean') return raw;
  if (typeof raw === 'string') {
    const lower = raw.toLowerCase();
    if (['true', '1', 'yes', 'on'].includes(lower)) return true;
    if (['false', '0', 'no', 'off'].includes(lower)) return false;
  }
  throw new ValueProblem('true or false');
}

export function optionalBoolean(): Pick<SettingSpec<boolean | undefined>, 'parse' | 'allowed'> {
  return {
    allowed: 'true or false, or unset (automatic)',
    parse: (raw) => (raw === undefined || raw === null || raw === '' ? undefined : parseBoolean(raw)),
  };
}

/**
 * A list: repeated flags, a comma-separated variable, or a JSON array of strings. With `check` (which
 * every item must pass), items never contain commas, so a flag may also hold several: `--x a,b --x c`.
 */
export function list(
  check?: (item: string) => boolean,
  allowed = 'a list of strings (comma-separated in a variable, an array in the file)',
): Pick<SettingSpec<string[]>, 'parse' | 'allowed'> {
  return {
    allowed,
    parse(raw) {
      const items = typeof raw === 'string' ? raw.split(',') : raw;
      if (!Array.isArray(items) || !items.every((item) => typeof item === 'string')) {
        throw new ValueProblem(allowed);
      }
      const split = check === undefined ? items : items.flatMap((item: string) => item.split(','));
      const out = split.map((item: string) => item.trim()).filter((item) => item !== '');
      if (check !== undefined && !out.every(check)) throw new ValueProblem(allowed);
      return out;
    },
  };
}

/** An IP address or a CIDR block (`10.0.0.0/8`, `::1`, `2001:db8::/32`). */
export const isAddressBlock = (value: string): boolean => !('invalid' in compileAddressBlocks([value]));
export const isUrl = (value: string): boolean => URL.canParse(value);
export const isDnsName = (value: string): boolean => /^(?!-)[a-z0-9-]+(\.[a-z0-9-]+)*\.?$/i.test(value);
